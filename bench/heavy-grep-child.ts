// Scenario 10's grep (issue #31), as a task pays it: the log saved twice as artifacts of a task in the SQLite
// store, the store closed and opened again; then a fresh artifact store over the task's artifacts for each first
// grep, which reads the artifact from SQLite, indexes its lines and searches them. The first grep of the process
// pays V8's compiling of the search too (a fresh `klym run`); the second, of the other copy, is what a task pays in a
// server that has grepped before. Then the same grep again, warm (the lines indexed).
// `heavy-grep-child.ts <dir> <file>`; prints one JSON line.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { TaskStore } from '@klym/core';
import { createArtifactStore, type ArtifactBackend } from '@klym/core/artifacts';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { summarize } from './stats.ts';

/** Does not start with a literal: RE2 cannot skip to a prefix, every line is searched. */
const PATTERN = String.raw`\d+Z svc-7 ERROR .*code=5\d2`;
const WARM_ROUNDS = 5;

const [directory = '', file = ''] = process.argv.slice(2);
const text = await readFile(path.join(directory, file), 'utf8');
const database = path.join(directory, 'grep.db');
const taskId = 'bench-grep';

/** Task `taskId`'s artifacts in `store`, as a task's run has them. */
const artifactsOf = (store: TaskStore): ArtifactBackend => ({
  save: (artifact) => store.saveArtifact(taskId, artifact),
  load: (id) => store.loadArtifact(taskId, id),
  list: () => store.listArtifacts(taskId),
});

const written = await createSqliteTaskStore({ path: database });
await written.insert({
  id: taskId,
  principal: 'bench',
  request: { prompt: 'grep' },
  status: 'running',
  createdAt: new Date().toISOString(),
  currentStep: 'bench',
  usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
});
const keeper = createArtifactStore({ backend: artifactsOf(written) });
const [cold, warm] = [await keeper.put('files__read_text_file', text), await keeper.put('files__read_text_file', text)] as const;
await written.close();

const store = await createSqliteTaskStore({ path: database });
const backend = artifactsOf(store);
/** A first grep of artifact `id`: a fresh artifact store, which reads it from SQLite and indexes it. */
const firstGrep = async (id: string): Promise<{ readonly ms: number; readonly matches: number }> => {
  const started = performance.now();
  const found = await createArtifactStore({ backend }).grep(id, PATTERN);
  return { ms: performance.now() - started, matches: found.total };
};
const coldFirst = await firstGrep(cold.id);
const first = await firstGrep(warm.id);

const artifacts = createArtifactStore({ backend });
await artifacts.grep(warm.id, PATTERN);
const warmMs: number[] = [];
for (let round = 0; round < WARM_ROUNDS; round++) {
  const started = performance.now();
  await artifacts.grep(warm.id, PATTERN);
  warmMs.push(performance.now() - started);
}
// What a first grep spends reading the artifact from SQLite alone (read once more, as it was then).
const started = performance.now();
await backend.load(warm.id);
const loadMs = performance.now() - started;

console.log(
  JSON.stringify({
    pattern: PATTERN,
    bytes: warm.bytes,
    coldFirstMs: coldFirst.ms,
    firstMs: first.ms,
    loadMs,
    warmMs: summarize(warmMs).median,
    matches: first.matches,
  }),
);
await store.close();
