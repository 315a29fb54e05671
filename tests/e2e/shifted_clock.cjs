// Moves the wall clock of a Node agent (Gemini CLI) for the tests that need a session
// made "earlier" than it is loaded. Preloaded with NODE_OPTIONS=--require by
// tests/e2e/acp_env.py's clock_prefix(); AGENTHOST_E2E_CLOCK is "+SECONDS" (ahead of the
// real clock) or "@ISO-TIME" (the clock starts there and runs on).
//
// Why not libfaketime: an LD_PRELOAD into a multi-threaded runtime (V8, libuv's pool)
// sees a faked time in one thread and the real one in another; upstream documents hangs
// of such runtimes (wolfcw/libfaketime#373), and Gemini under it died now and then at
// start in CI. Node's own Date is what Gemini reads to name and date its sessions.
"use strict";

const RealDate = Date;
const spec = process.env.AGENTHOST_E2E_CLOCK || "";
let offset = 0;
if (spec.startsWith("@")) {
  offset = RealDate.parse(spec.slice(1)) - RealDate.now();
} else if (spec.startsWith("+")) {
  offset = Number(spec.slice(1)) * 1000;
}
if (!Number.isFinite(offset)) {
  throw new Error(`AGENTHOST_E2E_CLOCK: cannot read ${JSON.stringify(spec)}`);
}

function now() {
  return RealDate.now() + offset;
}

class ShiftedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) {
      super(now());
    } else {
      super(...args);
    }
  }

  static now() {
    return now();
  }

  // Dates made by Node itself (fs.Stats) are real Dates: still `instanceof Date`.
  static [Symbol.hasInstance](value) {
    return value instanceof RealDate;
  }
}

// `Date()` called without `new` gives the time as a string.
globalThis.Date = new Proxy(ShiftedDate, {
  apply() {
    return new RealDate(now()).toString();
  },
});
