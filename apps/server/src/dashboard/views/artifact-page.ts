import type { TaskArtifactSliceView } from '@klym/core';
import { html } from 'hono/html';
import { formatCount, type Html } from './format.ts';

/** Lines a page of an artifact shows. */
export const ARTIFACT_PAGE_LINES = 200;

/** A page of a task's artifact: its size, its lines numbered as in the whole, and links to the pages around it. */
export function artifactPage(slice: TaskArtifactSliceView): Html {
  const { task_id: taskId, artifact, offset, lines } = slice;
  const base = `/dashboard/tasks/${taskId}/artifacts/${artifact.id}`;
  const previous = offset > 0 ? Math.max(0, offset - ARTIFACT_PAGE_LINES) : undefined;
  const nav = html`<nav class="artifact-pages">${previous === undefined ? '' : html`<a rel="prev" href="${base}?offset=${previous}">← lines ${previous}–${previous + ARTIFACT_PAGE_LINES - 1}</a>`} ${
    slice.next_offset === undefined ? '' : html`<a rel="next" href="${base}?offset=${slice.next_offset}">lines ${slice.next_offset}–${Math.min(artifact.lines, slice.next_offset + ARTIFACT_PAGE_LINES) - 1} →</a>`
  }</nav>`;
  return html`<section class="artifact" data-artifact="${artifact.id}">
<h1>Artifact <code>${artifact.id}</code> of task <a href="/dashboard/tasks/${taskId}"><code>${taskId}</code></a></h1>
<p class="meta">The whole result of <code>${artifact.tool}</code>: ${formatCount(artifact.bytes)} bytes, ${formatCount(artifact.lines)} lines. Lines ${offset}–${offset + lines.length - 1} (0-based; long lines cut).</p>
${nav}
<ol class="artifact-lines" start="${offset}">${lines.map((line, index) => html`<li value="${offset + index}"><code>${line}</code></li>`)}</ol>
${nav}
</section>`;
}
