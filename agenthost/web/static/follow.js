// Keeping a conversation's newest lines in sight. The page scrolls as a whole (the top
// bar, the agent's head and the input box are sticky), so "the bottom" is the bottom of
// the document. The view is *pinned* while the person is at the bottom: then whatever
// grows (a new entry, a tool result that makes a card taller, a burst of events, a
// font or a fold that changes a size, the input box) keeps the bottom in view, because
// a ResizeObserver sees the growth itself, after layout and before paint, instead of
// each event scrolling on its own. Only the person unpins it, by scrolling up (a wheel,
// a touch, a key, the scrollbar); the page's own changes never do, so a burst that
// lands between two frames cannot make the page believe the person left the bottom.

/** How close to the bottom (pixels) still counts as being at the bottom. */
export const NEAR_BOTTOM = 32;
/** How long after a wheel turn or a key press a scroll is still the person's (ms): a
 * smooth scroll goes on for a few frames after its event. */
const GESTURE_MS = 600;
/** Keys that scroll the page when no text field has the focus. */
const SCROLL_KEYS = new Set(["ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End", " "]);

/** Whether a key press there types text rather than scrolling the page. */
function typing(target) {
  return (
    target instanceof Element &&
    (target.isContentEditable || Boolean(target.closest("input, textarea, select")))
  );
}

/**
 * The pinned-to-the-bottom rule of one view. `watched`: the elements whose size
 * changes may move the bottom; `onPinned(pinned)`: told each time the rule flips. The
 * listeners stay until close().
 */
export class Follow {
  constructor(watched, onPinned = () => {}) {
    this.scroller = document.scrollingElement;
    this.pinned = true;
    this.onPinned = onPinned;
    this.lastTop = this.scroller.scrollTop;
    this.gestureUntil = 0; // a wheel turn or a scrolling key: its scroll is the person's
    this.holding = false; // a finger on the screen, or the mouse on the scrollbar
    this.resized = new ResizeObserver(() => {
      if (this.pinned) this.toBottom();
    });
    for (const el of watched) this.resized.observe(el);
    const gesture = (event) => {
      if (event.type === "keydown" && (!SCROLL_KEYS.has(event.key) || typing(event.target))) {
        return;
      }
      this.gestureUntil = performance.now() + GESTURE_MS;
    };
    const hold = (event) => {
      // a press on the page's scrollbar lands on the root element itself
      if (event.type === "pointerdown" && event.target !== document.documentElement) return;
      this.holding = true;
    };
    const release = () => {
      if (!this.holding) return;
      this.holding = false;
      this.gestureUntil = performance.now() + GESTURE_MS; // a flick glides on
    };
    this.listeners = [
      [window, "scroll", () => this.scrolled()],
      [window, "resize", () => this.pinned && this.toBottom()],
      [window, "wheel", gesture],
      [window, "keydown", gesture],
      [window, "touchstart", hold],
      [window, "pointerdown", hold],
      [window, "touchend", release],
      [window, "touchcancel", release],
      [window, "pointerup", release],
    ];
    for (const [target, type, fn] of this.listeners) {
      target.addEventListener(type, fn, { passive: true });
    }
    this.toBottom();
  }

  /** How far (pixels) the bottom of the document is below the bottom of the view. */
  distance() {
    const el = this.scroller;
    return el.scrollHeight - el.scrollTop - el.clientHeight;
  }

  /** Whether a scroll now is the person's doing. */
  byPerson() {
    return this.holding || performance.now() < this.gestureUntil;
  }

  scrolled() {
    const top = this.scroller.scrollTop;
    const up = top < this.lastTop;
    this.lastTop = top;
    if (this.distance() <= NEAR_BOTTOM) this.set(true);
    else if (up && this.byPerson()) this.set(false);
  }

  set(pinned) {
    if (pinned === this.pinned) return;
    this.pinned = pinned;
    this.onPinned(pinned);
  }

  /** Go to the bottom and stay there (the person sent something, or asked to). */
  pin() {
    this.gestureUntil = 0; // what the person did before asking is over
    this.set(true);
    this.toBottom();
  }

  /** Stay where the view is, whatever grows (the person asked for older entries). */
  unpin() {
    this.set(false);
  }

  toBottom() {
    const el = this.scroller;
    el.scrollTop = el.scrollHeight;
    this.lastTop = el.scrollTop;
  }

  close() {
    this.resized.disconnect();
    for (const [target, type, fn] of this.listeners) target.removeEventListener(type, fn);
  }
}
