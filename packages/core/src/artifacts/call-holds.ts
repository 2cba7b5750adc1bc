import type { AgentUsage } from '../agent/types.ts';

/** Holds what a call may spend at most on a run's budget, or says why the budget cannot (`ArtifactMapping.reserve`). */
export type Reserve = (most: AgentUsage) => { readonly release: () => void } | { readonly reason: string };

/** A call's hold: given back once, as the call ends. */
export interface CallHold {
  release(): void;
}

/**
 * Holds on a run's budget for model calls made at once (a map's, a program's sub-calls), so that together they
 * never pass it. A call the budget cannot pay for yet waits for one under way to end: what that one held and did
 * not spend comes back, and the next may fit then. Without a `reserve`, every call is held at once.
 */
export function createCallHolds(reserve: Reserve | undefined): {
  /**
   * A hold for `most`; `{ reason }` when the budget cannot pay for it and no call is under way to give some back.
   * `turn` runs before each try: it may throw (the run was cancelled) or return false to give up (`undefined`).
   */
  hold(most: AgentUsage, turn: () => boolean): Promise<CallHold | { readonly reason: string } | undefined>;
} {
  // The calls under way, and a promise settled as each ends.
  let underWay = 0;
  let ended = Promise.withResolvers<void>();
  const release = (held: { readonly release: () => void }): void => {
    held.release();
    underWay--;
    ended.resolve();
    ended = Promise.withResolvers<void>();
  };
  return {
    async hold(most, turn) {
      for (;;) {
        if (!turn()) return undefined;
        const held = reserve?.(most) ?? { release: () => {} };
        // Under way from its hold on, not from its request: a call between the two holds part of the budget too.
        if (!('reason' in held)) {
          underWay++;
          let released = false;
          return {
            release: () => {
              if (released) return;
              released = true;
              release(held);
            },
          };
        }
        if (underWay === 0) return held;
        await ended.promise;
      }
    },
  };
}
