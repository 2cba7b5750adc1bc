import { KlymError, type AgentRunner } from '@klym/core';
import { runResult as finishedRun } from '@klym/core/testing';

type RunResult = Awaited<ReturnType<AgentRunner>>;

/** A run result with the fields every stand-in fills the same way. */
export const runResult = (text: string, finishReason: string): RunResult => finishedRun(text, { finishReason });

/**
 * A stand-in for runAgent for tests of the server's own behaviour (no upstream needed): it answers
 * `fine` at once, or throws `MODEL_ERROR` when the prompt is `fail`. The journey tests use the real
 * runAgent.
 */
export const quickRunner: AgentRunner = async (options) => {
  if (options.prompt === 'fail') throw new KlymError('MODEL_ERROR', 'The stand-in model was told to fail');
  return runResult('fine', 'stop');
};

/**
 * A stand-in that writes `count` upstream log lines into its task's log, then waits until cancelled and
 * resolves `cancelled`, as runAgent does: a busy task with a long log.
 */
export function floodingRunner(count: number): AgentRunner {
  return (options) => {
    for (let index = 1; index <= count; index++) {
      options.onEvent?.({ type: 'upstream-log', entry: { upstream: 'grynya', source: 'stderr', level: 'info', message: `line ${index}: ${'x'.repeat(80)}` } });
    }
    options.onEvent?.({ type: 'step-start', step: 1 });
    return new Promise((resolve) => {
      const end = (): void => resolve(runResult('', 'cancelled'));
      if (options.signal?.aborted) end();
      options.signal?.addEventListener('abort', end, { once: true });
    });
  };
}
