// Scenario 9 (issue #27, item 5): a big answer from @modelcontextprotocol/server-filesystem over stdio,
// read through the pool and through the SDK's own Client, each read in a process of its own.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { figure, ratio } from './stats.ts';

const run = promisify(execFile);
const MiB = 2 ** 20;

interface ReadFigures {
  readonly elapsedMs: number;
  readonly peakGrowthMiB: number;
  readonly outcome: string;
}

async function readOnce(mode: 'klym' | 'sdk', directory: string, file: string, limit: number): Promise<ReadFigures> {
  const child = path.join(import.meta.dirname, 'big-message-child.ts');
  const { stdout } = await run(process.execPath, ['--expose-gc', '--conditions=klym-source', child, mode, directory, file, String(limit)], { maxBuffer: MiB });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as ReadFigures;
}

export async function bigMessage({ quick }: { quick: boolean }): Promise<string[]> {
  const directory = await mkdtemp(path.join(tmpdir(), 'klym-bench-big-'));
  try {
    // Log lines of 100 bytes; the answer carries the text twice (the text item and structuredContent).
    const line = `${'2026-11-25T19:00:00.000Z INFO svc-3 request served in 12 ms '.padEnd(99, '.')}\n`;
    const bigMb = quick ? 12 : 50;
    const smallMb = 12;
    await writeFile(path.join(directory, 'big.log'), line.repeat(bigMb * 10_000));
    if (bigMb !== smallMb) await writeFile(path.join(directory, 'small.log'), line.repeat(smallMb * 10_000));
    const smallFile = bigMb === smallMb ? 'big.log' : 'small.log';
    // An answer is about twice its file, plus a byte per line for the escaped newlines.
    const answerMiB = (mb: number): number => (mb * 2.02 * 1e6) / MiB;

    const rows: [string, number, ReadFigures][] = [];
    const klymBig = await readOnce('klym', directory, 'big.log', 256 * MiB);
    rows.push([`Klym, \`maxMessageBytes\` 256 MiB`, bigMb, klymBig]);
    rows.push([`Klym, \`maxMessageBytes\` 64 MiB`, bigMb, await readOnce('klym', directory, 'big.log', 64 * MiB)]);
    const klymSmall = await readOnce('klym', directory, smallFile, 256 * MiB);
    rows.push([`Klym, \`maxMessageBytes\` 256 MiB`, smallMb, klymSmall]);
    const sdkSmall = await readOnce('sdk', directory, smallFile, 256 * MiB);
    rows.push([`SDK Client, \`maxBufferSize\` 256 MiB`, smallMb, sdkSmall]);
    return [
      '| reader | file | answer | outcome | time | peak RSS growth | growth ÷ answer |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...rows.map(
        ([reader, mb, read]) =>
          `| ${reader} | ${mb} MB | ${answerMiB(mb).toFixed(0)} MiB | ${read.outcome.slice(0, 60)} | ${read.elapsedMs.toFixed(0)} ms | ${read.peakGrowthMiB.toFixed(0)} MiB | ${ratio(read.peakGrowthMiB / answerMiB(mb))} |`,
      ),
      '',
      `The SDK's reader ÷ Klym's at ${smallMb} MB: ${ratio(sdkSmall.elapsedMs / klymSmall.elapsedMs)} the time.`,
      figure('big_message_rss_per_answer', klymBig.peakGrowthMiB / answerMiB(bigMb)),
      figure('big_message_sdk_time_ratio', sdkSmall.elapsedMs / klymSmall.elapsedMs),
    ];
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
