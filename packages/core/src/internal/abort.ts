/**
 * Settles like `promise`, or rejects with `signal.reason` as soon as `signal` aborts, whichever comes
 * first. The abort listener is removed either way. `promise` itself is left to settle on its own.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** `AbortSignal.any` over the signals that are given; a lone signal as it is (`any` costs microseconds a call). */
export function anySignal(...signals: readonly (AbortSignal | undefined)[]): AbortSignal {
  const given = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  return given.length === 1 ? (given[0] as AbortSignal) : AbortSignal.any(given);
}
