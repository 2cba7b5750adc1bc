// The public API of @klym/core, frozen: one API Extractor report per entry point of its package.json (all but
// `./internal`, which promises nothing), in packages/core/api/. Reads the built declarations (`pnpm build` first).
//   node scripts/api-report.ts           writes the reports: commit them with the change, so the diff is reviewed
//   node scripts/api-report.ts --check   fails on an entry point whose API differs from its committed report
//                                        (`pnpm check` runs it as `pnpm api:check`, after building core alone)
//   --core <dir>                         another copy of packages/core (test/api-report-check.test.ts uses one)
// A type that an exported signature uses but no entry point exports fails both (ae-forgotten-export). API
// Extractor sees one entry point at a time, so an entry point's signature may use what another one exports (the
// root's `TaskManagerOptions` names `TaskQueue` of `./engine`): its shape is frozen in that one's report.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CompilerState, Extractor, ExtractorConfig, ExtractorLogLevel, type ExtractorMessage } from '@microsoft/api-extractor';

const { values: flags } = parseArgs({ options: { check: { type: 'boolean', default: false }, core: { type: 'string' } } });
const core = path.resolve(flags.core ?? path.join(import.meta.dirname, '../packages/core'));
const check = flags.check;
const manifest = JSON.parse(readFileSync(path.join(core, 'package.json'), 'utf8')) as { exports: Record<string, { types: string }> };
const base = ExtractorConfig.loadFile(path.join(core, 'api-extractor.json'));

mkdirSync(path.join(core, 'api'), { recursive: true });
/** The names a built entry point exports: its source lists each by name (`export { a, type B } from …`, no `export *`). */
const exportsOf = (declarations: string): string[] =>
  [...readFileSync(declarations, 'utf8').matchAll(/^export (?:type )?\{([^}]*)\}/gm)].flatMap((clause) =>
    clause[1]!
      .split(',')
      .map((name) =>
        name
          .trim()
          .replace(/^type /, '')
          .split(/ as /)
          .pop()!,
      )
      .filter((name) => name !== ''),
  );
const entryPoints = Object.entries(manifest.exports).filter(([entry]) => entry !== './internal');
const exportedNames = new Set(entryPoints.flatMap(([, { types }]) => exportsOf(path.join(core, types))));

// The root is what an agent that embeds Klym uses (issue #42: at most 120 names); engine pieces go to subpaths.
// Every entry point names its exports one by one, so that a change to them is a visible diff.
const MAX_ROOT_NAMES = 120;
const refusals: string[] = [];
const rootNames = exportsOf(path.join(core, manifest.exports['.']!.types)).length;
if (rootNames > MAX_ROOT_NAMES) {
  refusals.push(`the root entry point exports ${rootNames} names, more than ${MAX_ROOT_NAMES}: move engine pieces to a subpath.`);
}
for (const [entry, { types }] of entryPoints) {
  if (/^export \*/m.test(readFileSync(path.join(core, types), 'utf8'))) refusals.push(`${entry} re-exports with \`export *\`: name each export.`);
}
const QUIET = new Set<string>([
  'console-preamble',
  'console-compiler-version-notice',
  'console-api-report-not-copied',
  'console-api-report-copied',
  'console-api-report-created',
]);

const configOf = (types: string, reportFileName: string): ExtractorConfig =>
  ExtractorConfig.prepare({
    configObject: { ...base, mainEntryPointFilePath: path.join(core, types), apiReport: { ...base.apiReport!, reportFileName } },
    configObjectFullPath: path.join(core, 'api-extractor.json'),
    packageJsonFullPath: path.join(core, 'package.json'),
  });
const reportOf = (entry: string): string => (entry === '.' ? 'core.api.md' : `core-${entry.slice(2)}.api.md`);
// One TypeScript program over every entry point, not one each: the reports take a third of the time.
const [[firstEntry, first]] = entryPoints as [[string, { types: string }]];
const compilerState = CompilerState.create(configOf(first.types, reportOf(firstEntry)), {
  additionalEntryPoints: entryPoints.map(([, { types }]) => path.join(core, types)),
});

let failed = 0;
for (const [entry, { types }] of entryPoints) {
  const reportFileName = reportOf(entry);
  const result = Extractor.invoke(configOf(types, reportFileName), {
    compilerState,
    localBuild: !check,
    messageCallback: (message: ExtractorMessage) => {
      // API Extractor's banner, TypeScript notice and "copy this file" advice: the lines below say what happened.
      if (QUIET.has(message.messageId)) {
        message.logLevel = ExtractorLogLevel.None;
        message.handled = true;
      }
      const forgotten = message.messageId === 'ae-forgotten-export' && /The symbol "(\w+)"/.exec(message.text)?.[1];
      if (forgotten && exportedNames.has(forgotten)) {
        message.logLevel = ExtractorLogLevel.None;
        message.handled = true;
      }
    },
  });
  const changed = check && result.apiReportChanged;
  if (!result.succeeded || changed) failed++;
  const state = changed ? 'CHANGED' : result.succeeded ? (result.apiReportChanged ? 'updated' : 'unchanged') : 'FAILED';
  console.log(`${entry.padEnd(12)} api/${reportFileName}: ${state}`);
  if (changed) {
    const diff = spawnSync('diff', ['-u', path.join(core, 'api', reportFileName), path.join(core, 'node_modules/.cache/api-report', reportFileName)], {
      encoding: 'utf8',
    });
    console.log(diff.stdout.split('\n').slice(2).join('\n'));
  }
}
console.log(`the root entry point exports ${rootNames} names (at most ${MAX_ROOT_NAMES})`);
for (const refusal of refusals) console.error(`api-report: ${refusal}`);
if (failed > 0) {
  console.error(
    check
      ? `api-report: the public API of @klym/core changed in ${failed} entry point(s). If it is meant to, run \`pnpm api\` and commit packages/core/api/ with the change.`
      : `api-report: ${failed} entry point(s) failed (above).`,
  );
}
if (failed > 0 || refusals.length > 0) process.exit(1);
