import type { TaskArtifactSliceView } from '@klym/core';
import { html } from 'hono/html';
import { formatCount, type Html } from './format.ts';

/** Lines a page of an artifact shows at most; a page also stops when it is full, as the model's do. */
export const ARTIFACT_PAGE_LINES = 200;
/** Tokens a page holds at most: 200 lines of a log, or a long line's next 100,000 characters or so. */
export const ARTIFACT_PAGE_TOKENS = 40_000;

/** A page of a task's artifact: its size, its lines numbered as in the whole, and links to the pages around it. */
export function artifactPage(slice: TaskArtifactSliceView): Html {
  const { task_id: taskId, artifact, offset } = slice;
  const lines = slice.lines ?? [];
  const base = `/dashboard/tasks/${taskId}/artifacts/${artifact.id}`;
  const previous = offset > 0 ? Math.max(0, offset - ARTIFACT_PAGE_LINES) : undefined;
  const next =
    slice.next_offset === undefined
      ? undefined
      : `${base}?offset=${slice.next_offset}${slice.next_char_offset === undefined ? '' : `&char_offset=${slice.next_char_offset}`}`;
  const nextLabel =
    slice.next_char_offset === undefined
      ? `from line ${slice.next_offset} →`
      : `line ${slice.next_offset} from character ${formatCount(slice.next_char_offset)} →`;
  const nav = html`<nav class="artifact-pages">
    ${previous === undefined ? '' : html`<a rel="prev" href="${base}?offset=${previous}">← lines ${previous}–${previous + ARTIFACT_PAGE_LINES - 1}</a>`}
    ${next === undefined ? '' : html`<a rel="next" href="${next}">${nextLabel}</a>`}
  </nav>`;
  const records =
    artifact.records === undefined
      ? ''
      : ` A JSON answer kept as ${formatCount(artifact.records.count)} records, one per line from line ${artifact.records.first_line}.`;
  const from = slice.char_offset === undefined ? '' : ` (line ${offset} from character ${formatCount(slice.char_offset)})`;
  return html`<section class="artifact" data-artifact="${artifact.id}">
    <h1>
      Artifact <code>${artifact.id}</code> of task <a href="/dashboard/tasks/${taskId}"><code>${taskId}</code></a>
    </h1>
    <p class="meta">
      The whole result of <code>${artifact.tool}</code>: ${formatCount(artifact.bytes)} bytes, ${formatCount(artifact.lines)} lines.${records} Lines
      ${offset}–${offset + lines.length - 1}${from} (0-based).
    </p>
    ${nav}
    <ol class="artifact-lines" start="${offset}">
      ${lines.map((line, index) => html`<li value="${offset + index}"><code>${line}</code></li>`)}
    </ol>
    ${nav}
  </section>`;
}
