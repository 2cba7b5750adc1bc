// `pnpm check` fails when @klym/core's public API changes and its report in packages/core/api/ is left as it was:
// shown on a copy of the package (its own build and reports), with one export added to its root entry.
import { execFile } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');
const core = path.join(root, 'packages/core');
const work = mkdtempSync(path.join(tmpdir(), 'klym-api-check-'));
const copy = path.join(work, 'packages/core');
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface CheckRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Builds the copy's declarations as `pnpm api:check` does, then runs the check on them. */
async function checkCopy(): Promise<CheckRun> {
  await promisify(execFile)(path.join(root, 'node_modules/.bin/tsc'), ['-p', path.join(copy, 'tsconfig.build.json')]);
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [path.join(root, 'scripts/api-report.ts'), '--check', '--core', copy], {
      cwd: root,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const { code, stdout, stderr } = error as { code: number; stdout: string; stderr: string };
    return { code, stdout, stderr };
  }
}

beforeAll(() => {
  // The package's sources, settings and committed reports; its dependencies by link (its own node_modules stays a
  // directory of the copy's, since API Extractor writes its fresh reports into node_modules/.cache there).
  cpSync(path.join(root, 'tsconfig.base.json'), path.join(work, 'tsconfig.base.json'));
  symlinkSync(path.join(root, 'node_modules'), path.join(work, 'node_modules'));
  for (const entry of ['src', 'api', 'package.json', 'tsconfig.json', 'tsconfig.build.json', 'api-extractor.json']) {
    cpSync(path.join(core, entry), path.join(copy, entry), { recursive: true });
  }
  mkdirSync(path.join(copy, 'node_modules'));
  for (const dependency of readdirSync(path.join(core, 'node_modules'))) {
    if (!dependency.startsWith('.')) symlinkSync(path.join(core, 'node_modules', dependency), path.join(copy, 'node_modules', dependency));
  }
});

describe('the API report check (`pnpm api:check`, part of `pnpm check`)', () => {
  it('is part of `pnpm check`, after a build of core alone', () => {
    const { scripts } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.check).toMatch(/\bpnpm run api:check\b/);
    expect(scripts['api:check']).toBe('tsc -p packages/core/tsconfig.build.json && node scripts/api-report.ts --check');
  });

  it('passes on the package as committed, and fails on an export left out of the report, naming the entry point and the change', async () => {
    const committed = await checkCopy();
    expect(committed.code).toBe(0);
    expect(committed.stdout).toMatch(/^\. +api\/core\.api\.md: unchanged$/m);

    appendFileSync(path.join(copy, 'src/index.ts'), "export { REDACTED } from './redact.ts';\n");
    const changed = await checkCopy();
    expect(changed.code).toBe(1);
    expect(changed.stdout).toMatch(/^\. +api\/core\.api\.md: CHANGED$/m);
    expect(changed.stdout).toMatch(/^\+export const REDACTED = "\[redacted\]";$/m);
    // The other entry points did not change, and say so.
    expect(changed.stdout).toMatch(/^\.\/server +api\/core-server\.api\.md: unchanged$/m);
    expect(changed.stderr).toContain('the public API of @klym/core changed in 1 entry point(s). If it is meant to, run `pnpm api`');
  }, 180_000);

  it('refuses an entry point that re-exports with `export *`, whose names no diff would show', async () => {
    appendFileSync(path.join(copy, 'src/engine.ts'), "export * from './redact.ts';\n");
    const refused = await checkCopy();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('api-report: ./engine re-exports with `export *`: name each export.');
  }, 180_000);
});
