// `pnpm bench`: every scenario, each measured side by side in one run, printed as Markdown tables
// (docs/benchmarks.md keeps the latest figures and says what each scenario measures).
import os from 'node:os';
import { failureFigures } from './failure-figures.ts';
import { freshVsPooled } from './fresh-vs-pooled.ts';
import { poolOverhead } from './pool-overhead.ts';
import { serverFigures } from './server-figures.ts';
import { storeFigures } from './store-figures.ts';

const quick = process.argv.includes('--quick');
const scale = quick ? { rounds: 4, perRound: 50 } : { rounds: 10, perRound: 200 };

console.log(`# Klym benchmarks — ${new Date().toISOString()}`);
console.log(`Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB${quick ? ' (--quick)' : ''}\n`);

console.log('## 1. Pool overhead per call: pooled callTool vs raw SDK Client.callTool on an open session\n');
console.log((await poolOverhead(scale)).join('\n'));

console.log('\n## 2. Task start to first tool result: pooled session vs fresh connection per task (legacy SSE)\n');
console.log((await freshVsPooled({ rounds: scale.rounds, perRound: Math.max(10, scale.perRound / 10) })).join('\n'));

console.log('\n## 3. The pool under failure: kill, restart, and a dead upstream\n');
console.log((await failureFigures({ rounds: quick ? 2 : 5 })).join('\n'));

console.log('\n## 7. The task store alone: SQLite against memory, in one process\n');
console.log((await storeFigures({ quick })).join('\n'));

console.log('\n## The Klym server\n');
console.log((await serverFigures({ quick })).join('\n'));
