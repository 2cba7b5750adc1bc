import type { KlymError } from '../errors.ts';
import { realClock, type PoolClock } from './clock.ts';
import type { UpstreamSession } from './upstream-session.ts';

/**
 * One call through the pool, and what may cut it short: its caller's signal or its scope closing (it is
 * then `aborted`), or the pool itself — closing, or the call's hard time limit — which says why in
 * `failure`. A request under way is cut by its session, which sends the upstream the
 * `notifications/cancelled` the SDK would have sent, and the call rejects at once.
 *
 * It holds no AbortSignal of its own until a part of the call must wait on one (`signal`: a session to
 * come free): the SDK gets none, since each signal it is given costs its creation and a listener the SDK
 * never removes — a few µs a call, several per cent of a call over stdio. Its time (how long it has run,
 * its hard limit) is its clock's. Internal to the session pool.
 */
export class InFlightCall {
  /** When the call began, on its clock. */
  readonly startedAt: number;
  readonly #clock: PoolClock;
  readonly #callerSignal: AbortSignal | undefined;
  readonly #onCallerAbort: (() => void) | undefined;
  #controller: AbortController | undefined;
  #cut = false;
  #reason: unknown;
  #failure: KlymError | undefined;
  /** The session serving the request under way, and how to reject the caller's wait for it. */
  #session: UpstreamSession | undefined;
  #reject: ((reason: unknown) => void) | undefined;

  /** Follows `callerSignal` until `end()`. */
  constructor(callerSignal: AbortSignal | undefined, clock: PoolClock = realClock) {
    this.#clock = clock;
    this.startedAt = clock.now();
    this.#callerSignal = callerSignal;
    if (callerSignal === undefined) return;
    if (callerSignal.aborted) {
      this.abort(callerSignal.reason);
      return;
    }
    this.#onCallerAbort = () => this.abort(callerSignal.reason);
    callerSignal.addEventListener('abort', this.#onCallerAbort, { once: true });
  }

  /** Whether the caller's signal or scope cut the call short. */
  get aborted(): boolean {
    return this.#cut && this.#failure === undefined;
  }

  /** Why the call was cut short, as its caller or scope said. */
  get reason(): unknown {
    return this.#reason;
  }

  /** What the pool cut the call short with (it is closing; the call ran past its hard limit). */
  get failure(): KlymError | undefined {
    return this.#failure;
  }

  /** Milliseconds since the call began. */
  get elapsedMs(): number {
    return this.#clock.now() - this.startedAt;
  }

  /** Aborts when the call is cut short; made on first use, by whatever must wait. */
  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#cut) this.#controller.abort(this.#reason);
    return this.#controller.signal;
  }

  /** Cuts the call short for its caller or scope. */
  abort(reason: unknown): void {
    this.#cutShort(reason);
  }

  /** Cuts the call short for the pool; the caller is answered `failure`. */
  fail(failure: KlymError): void {
    if (this.#cut) return;
    this.#failure = failure;
    this.#cutShort(failure);
  }

  /**
   * A hard limit: fails the call with `failure()` once `ms` have passed, unless the returned function was
   * called first (when what the limit guards has settled).
   */
  failAfter(ms: number, failure: () => KlymError): () => void {
    const timer = this.#clock.setTimeout(() => this.fail(failure()), ms);
    return () => this.#clock.clearTimeout(timer);
  }

  /** Throws the reason if the call was cut short. */
  throwIfCut(): void {
    if (this.#cut) throw this.#reason;
  }

  /**
   * Runs `request` on `session`: settles as it does, or rejects with the reason as soon as the call is cut
   * short, while the session sends the upstream its cancellation.
   */
  request<T>(session: UpstreamSession, request: Promise<T>): Promise<T> {
    if (this.#cut) {
      session.cancelRequest(this.#reason);
      request.catch(() => {});
      return Promise.reject(this.#reason);
    }
    return new Promise<T>((resolve, reject) => {
      this.#session = session;
      this.#reject = reject;
      request.then(
        (value) => {
          this.#session = undefined;
          resolve(value);
        },
        (error: unknown) => {
          this.#session = undefined;
          reject(error);
        },
      );
    });
  }

  /** Stops following the caller's signal. */
  end(): void {
    if (this.#onCallerAbort !== undefined) this.#callerSignal?.removeEventListener('abort', this.#onCallerAbort);
  }

  #cutShort(reason: unknown): void {
    if (this.#cut) return;
    this.#cut = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    const session = this.#session;
    this.#session = undefined;
    if (session === undefined) return;
    session.cancelRequest(reason);
    this.#reject?.(reason);
  }
}
