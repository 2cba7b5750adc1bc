import { configSecrets, serverOptions } from '../config/core-options.ts';
import { handleProcessFaults, startKlymWorker } from '../server/index.ts';
import { configFor, EXIT, type CliIo } from './cli.ts';
import type { CommandLine } from './parse-command.ts';
import { openTracing } from '../telemetry/tracing-env.ts';
import { aborted, logSink, upstreamNames } from './log-sink.ts';

/** `host:port/db` of a Redis URL: never its user or password. */
const redisWhere = (url: string): string => {
  const parsed = new URL(url);
  return `${parsed.host}/${parsed.pathname.replace(/^\//, '') || '0'}`;
};

/**
 * `klym worker`: runs tasks from the queue that `klym serve` fronts share on Redis, with `GET /healthz`
 * on `worker.host`:`worker.port`, until `io.signal` aborts (SIGINT/SIGTERM); then it takes no new task,
 * lets running ones finish within the grace period and hands the rest back to the queue. Faults are
 * handled as `klym serve` handles them. Resolves with the exit status: 0, or 2 after an uncaught exception.
 */
export async function workerCommand(parsed: CommandLine, io: CliIo): Promise<number> {
  const { config, file } = configFor(parsed, io);
  const sink = logSink(config, io);
  // Off unless the standard OTEL_* environment asks for it; a variable Klym cannot honour stops start-up, named.
  const tracing = await openTracing(io.env).catch(async (error: unknown) => {
    await sink.close();
    throw error;
  });
  if (tracing !== undefined) sink.log(`klym: tracing on: spans go to ${tracing.destination}`);
  const options = { ...serverOptions(config, io.cwd), host: config.worker.host, port: config.worker.port, log: sink.log, ...(tracing === undefined ? {} : { tracing: { tracer: tracing.tracer } }) };
  const fault = new AbortController();
  const stopHandling = handleProcessFaults({ log: sink.log, secrets: configSecrets(config), shutdown: () => fault.abort() });
  try {
    const worker = await startKlymWorker(options);
    io.stdout.write(
      `Klym worker is running up to ${config.tasks.concurrency} tasks at once from the queue on redis ${redisWhere(config.tasks.store)}` +
        `${file === undefined ? '' : ` (config ${file})`}\n  health: ${worker.url}/healthz · upstreams: ${upstreamNames(config)} · model: ${config.llm.model}\n`,
    );
    await Promise.race([aborted(io.signal), aborted(fault.signal)]);
    sink.log('klym: worker stopping (running tasks get a grace period, then go back to the queue for another worker)');
    await worker.close();
    return fault.signal.aborted ? EXIT.failure : EXIT.ok;
  } finally {
    stopHandling();
    // After the server closed: the spans of the tasks it ended are exported too.
    await tracing?.close();
    await sink.close();
  }
}
