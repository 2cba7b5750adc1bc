import { startKlymWorker } from '../server/index.ts';
import type { CliIo } from './cli.ts';
import { upstreamNames } from './log-sink.ts';
import type { CommandLine } from './parse-command.ts';
import { openServerProcess } from './server-process.ts';

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
  const { config, file, options, stopped, status, close } = await openServerProcess(parsed, io);
  try {
    const worker = await startKlymWorker({ ...options, host: config.worker.host, port: config.worker.port });
    io.stdout.write(
      `Klym worker is running up to ${config.tasks.concurrency} tasks at once from the queue on redis ${redisWhere(config.tasks.store)}` +
        `${file === undefined ? '' : ` (config ${file})`}\n  health: ${worker.url}/healthz · upstreams: ${upstreamNames(config)} · model: ${config.llm.model}\n`,
    );
    await stopped;
    options.log('klym: worker stopping (running tasks get a grace period, then go back to the queue for another worker)');
    await worker.close();
    return status();
  } finally {
    await close();
  }
}
