/**
 * The simulator's agenda: a binary min-heap of timed events. Ties on time keep insertion order
 * (a sequence number), so a run is deterministic.
 */

/** One scheduled event. */
interface Entry<E> {
  atMs: number;
  seq: number;
  event: E;
}

/** Timed events, earliest first; equal times in scheduling order. */
export class EventQueue<E> {
  private readonly heap: Entry<E>[] = [];
  private seq = 0;

  /** Schedules `event` at `atMs` (simulated ms). */
  push(atMs: number, event: E): void {
    const h = this.heap;
    h.push({ atMs, seq: this.seq++, event });
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i], h[parent])) break;
      [h[i], h[parent]] = [h[parent], h[i]];
      i = parent;
    }
  }

  /** Removes and returns the earliest event, or undefined when empty. */
  pop(): { atMs: number; event: E } | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l], h[m])) m = l;
        if (r < h.length && before(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return { atMs: top.atMs, event: top.event };
  }

  get size(): number {
    return this.heap.length;
  }
}

function before<E>(a: Entry<E>, b: Entry<E>): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
}
