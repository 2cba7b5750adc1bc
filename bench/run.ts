// `pnpm bench`: every scenario, each measured side by side in one run, printed as Markdown tables
// (docs/benchmarks.md says what each scenario measures; `pnpm bench:page <output>` writes its figures there).
// `--quick` is a shorter run; `--only <name>[,<name>…]` runs only the scenarios named (see `scenarios`).
// The header names the commit and the load average at the start, the last line the load average at the end:
// on two shared cores the machine's state moves the figures more than most changes do.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { bigMessage } from './big-message.ts';
import { codeFigures } from './code.ts';
import { failureFigures } from './failure-figures.ts';
import { fairness } from './fairness.ts';
import { freshVsPooled } from './fresh-vs-pooled.ts';
import { heavy } from './heavy.ts';
import { poolOverhead } from './pool-overhead.ts';
import { runnerThreads } from './runner-threads.ts';
import { scaleOut } from './scale-out.ts';
import { serverFigures, startFigures } from './server-figures.ts';
import { storeFigures } from './store-figures.ts';

const quick = process.argv.includes('--quick');
const scale = quick ? { rounds: 4, perRound: 50 } : { rounds: 10, perRound: 200 };

/**
 * Every scenario, in the order they run: its name for `--only`, its heading, its run, and whether it runs only
 * when named (a part of another scenario, on its own).
 */
const scenarios: readonly (readonly [name: string, heading: string, run: () => Promise<string[]>, byName?: 'only when named'])[] = [
  ['pool-overhead', '## 1. Pool overhead per call: pooled callTool vs raw SDK Client.callTool on an open session', () => poolOverhead(scale)],
  [
    'fresh-vs-pooled',
    '## 2. Task start to first tool result: pooled session vs fresh connection per task (legacy SSE)',
    () => freshVsPooled({ rounds: scale.rounds, perRound: Math.max(10, scale.perRound / 10) }),
  ],
  ['failure', '## 3. The pool under failure: kill, restart, and a dead upstream', () => failureFigures({ rounds: quick ? 2 : 5 })],
  ['store', '## 7. The task store alone: SQLite against memory, in one process', () => storeFigures({ quick })],
  ['server', '## The Klym server', () => serverFigures({ quick })],
  // The server's scenario 4 alone: start_p50_ms beside input_resume_ms_p50, without the rest of the server's figures.
  ['start', "## 4. start_async_agent_task under load, and an answer's resume", () => startFigures({ quick }), 'only when named'],
  ['scale-out', '## 8. Scale out on Redis: fronts and workers as processes', () => scaleOut({ quick })],
  ['big-message', '## 9. Big messages from an upstream: a file read through server-filesystem over stdio', () => bigMessage({ quick })],
  ['heavy', '## 10. Heavy inputs: the same questions through map and through query (a log, the graph)', () => heavy({ quick })],
  ['fairness', "## 11. Fair turns between principals: a newcomer's task behind another caller's 40-task backlog", () => fairness({ quick })],
  ['code', '## 12. Code over the evidence: a 200-call diagnosis as one program and as a tool loop', () => codeFigures({ quick })],
  ['runner-threads', '## 13. Runner threads: a CPU-heavy mix of tasks on one runner thread and on two', () => runnerThreads({ quick })],
];

const onlyAt = process.argv.indexOf('--only');
const only = onlyAt === -1 ? undefined : (process.argv[onlyAt + 1] ?? '').split(',').filter((name) => name !== '');
const unknown = only?.filter((name) => !scenarios.some(([known]) => known === name)) ?? [];
if (only?.length === 0 || unknown.length > 0) {
  console.error(
    `Expected --only followed by scenario names (${scenarios.map(([name]) => name).join(', ')}), got ${only?.length === 0 ? 'none' : unknown.map((name) => `"${name}"`).join(', ')}`,
  );
  process.exit(1);
}

const git = (...args: string[]): string =>
  execFileSync('git', args, { cwd: import.meta.dirname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

/** The checkout's commit, `+ changes` when its tree differs from it; `unknown` outside a git checkout. */
function commitOf(): string {
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') === '' ? '' : ' + changes'}`;
  } catch {
    return 'unknown';
  }
}

/** The 1, 5 and 15 minute load averages, as `uptime` prints them. */
const loadAverage = (): string =>
  os
    .loadavg()
    .map((load) => load.toFixed(2))
    .join(', ');

console.log(`# Klym benchmarks — ${new Date().toISOString()}, commit ${commitOf()}`);
console.log(
  `Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB${quick ? ' (--quick)' : ''}${only === undefined ? '' : ` (--only ${only.join(',')})`}; load average at the start: ${loadAverage()}\n`,
);

let first = true;
for (const [name, heading, run, byName] of scenarios) {
  if (only === undefined ? byName !== undefined : !only.includes(name)) continue;
  console.log(`${first ? '' : '\n'}${heading}\n`);
  console.log((await run()).join('\n'));
  first = false;
}
console.log(`\nload average at the end: ${loadAverage()}`);
