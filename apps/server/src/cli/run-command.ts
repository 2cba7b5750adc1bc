import { KlymError, createSessionPool, isKlymError, runAgent } from '@klym/core';
import { createRedactor } from '@klym/core/server';
import { configSecrets, poolUpstreams, runSettings } from '../config/core-options.ts';
import { configFor, EXIT, exitCodeOf, type CliIo } from './cli.ts';
import type { CommandLine } from './parse-command.ts';
import { errorJson, progressWriter, resultJson, upstreamLogWriter } from './run-output.ts';

/**
 * `klym run "prompt"`: one agent run in the foreground over the configured upstreams, no server. The
 * final JSON goes to stdout; progress (on a terminal, or with `--progress`), upstream log messages and a
 * line per upstream that was unavailable go to stderr. Resolves with the exit status: 0 the run ended
 * (done, budget, see `finishReason`; an upstream that is down does not end a run: the model is told, and
 * the JSON's `unavailable` names it), 1 a configuration error, 2 the run failed (the model, or Klym
 * itself), 130 interrupted (SIGINT/SIGTERM; the partial result is printed).
 */
export async function runCommand(parsed: CommandLine, io: CliIo): Promise<number> {
  const { config } = configFor(parsed, io);
  const secrets = configSecrets(config);
  const scrub = createRedactor(secrets).text;
  const showProgress = parsed.progress ?? io.stderr.isTTY === true;
  const progress = showProgress ? progressWriter(io.stderr, scrub) : undefined;
  let unavailable: readonly { readonly upstream: string; readonly error: string }[] = [];

  const controller = new AbortController();
  const onInterrupt = (): void => controller.abort(new KlymError('ABORTED', 'klym run was interrupted'));
  if (io.signal?.aborted) onInterrupt();
  io.signal?.addEventListener('abort', onInterrupt, { once: true });
  let pool: Awaited<ReturnType<typeof createSessionPool>> | undefined;
  try {
    pool = await createSessionPool({ upstreams: poolUpstreams(config), onLog: upstreamLogWriter(io.stderr, config.logging.level, scrub) });
    const result = await runAgent({
      pool,
      prompt: parsed.prompt,
      model: config.llm.model,
      ...runSettings(config),
      budget: { ...config.budget.default },
      secrets,
      signal: controller.signal,
      onEvent: (event) => {
        if (event.type === 'run-start') unavailable = event.unavailable;
        progress?.(event);
      },
    });
    io.stdout.write(scrub(resultJson(result, unavailable)));
    // An upstream that is down does not end a run (the model is told, and answers with what it has), but whoever ran it should know.
    for (const { upstream, error } of unavailable)
      io.stderr.write(scrub(`klym: upstream ${upstream} was unavailable; the run went on without it: ${error.replace(/\s*\n\s*/g, ' ')}\n`));
    if (result.finishReason === 'cancelled') {
      io.stderr.write('klym: the run was interrupted; its partial result is on stdout\n');
      return EXIT.interrupted;
    }
    return EXIT.ok;
  } catch (error) {
    const known = isKlymError(error)
      ? error
      : new KlymError('INTERNAL', `klym run failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    if (controller.signal.aborted && known.code === 'ABORTED') {
      io.stdout.write(scrub(errorJson(known)));
      io.stderr.write('klym: the run was interrupted\n');
      return EXIT.interrupted;
    }
    io.stdout.write(scrub(errorJson(known)));
    io.stderr.write(scrub(`klym: ${known.code}: ${known.message.replace(/\s*\n\s*/g, ' ')}\n`));
    return exitCodeOf(known);
  } finally {
    io.signal?.removeEventListener('abort', onInterrupt);
    await pool?.close({ drainTimeoutMs: 1_000 }).catch(() => {});
  }
}
