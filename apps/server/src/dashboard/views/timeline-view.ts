import type { AgentUsage } from '@klym/core';
import { html } from 'hono/html';
import type { TimelineItem, TimelineNote, TimelineStep, TimelineToolCall } from '../timeline.ts';
import { formatCost, formatCount, formatDuration, formatTime, preview, type Html } from './format.ts';

const tokens = (usage: AgentUsage | undefined): string =>
  usage === undefined ? '' : `${formatCount(usage.inputTokens)} in / ${formatCount(usage.outputTokens)} out tokens${usage.estimated ? ' (estimated)' : ''}`;

const str = (value: unknown): string => (typeof value === 'string' ? value : preview(value, 120));

/** A note of no step, in words. */
function noteText(note: TimelineNote): string {
  switch (note.type) {
    case 'task-create':
      return `Queued for ${note.data.model}${note.data.recordResult ? ', its result to be written back' : ''}`;
    case 'task-start':
      return `Started on ${note.data.model}`;
    case 'task-resume': {
      const { fromStep, interruptedCalls } = note.data;
      return `Resumed after step ${str(fromStep)}${interruptedCalls.length > 0 ? ` (interrupted: ${interruptedCalls.join(', ')})` : ''}`;
    }
    case 'task-end': {
      const { status, error, reason } = note.data;
      return `Ended ${status}${error === undefined ? '' : ` — ${error.code}: ${error.message}`}${reason === undefined ? '' : ` (${reason})`}`;
    }
    case 'run-start': {
      const { model, tools, unavailable } = note.data;
      // A list past 20 items ends with how many more there were.
      const unavailableText = unavailable.map((item) => (typeof item === 'string' ? `; ${item}` : `; ${item.upstream} unavailable: ${item.error}`)).join('');
      return `Run on ${model} with ${tools.length} ${tools.length === 1 ? 'tool' : 'tools'}${unavailableText}`;
    }
    case 'run-end': {
      const { finishReason, steps, usage, costUsd, elapsedMs, error } = note.data;
      return `Run ended: ${finishReason} after ${str(steps)} steps, ${formatCount(usage.totalTokens)} tokens, ${costUsd === undefined ? '' : `${formatCost(costUsd)}, `}${formatDuration(elapsedMs)}${error === undefined ? '' : ` — ${error.code}: ${error.message}`}`;
    }
    case 'input-required':
      return note.data.toolName === undefined
        ? `Asked its caller: ${preview(note.data.question, 600)}`
        : `Waiting for its caller's approval of ${note.data.toolName}: ${preview(note.data.question, 600)}`;
    case 'input-answered':
      return note.data.approved === undefined
        ? `Its caller answered${note.data.chars === undefined ? '' : ` (${formatCount(note.data.chars)} characters)`}; queued to go on`
        : `Its caller ${note.data.approved ? 'approved' : 'denied'} the call; queued to go on`;
    case 'budget':
      return `Budget ${note.data.name} used up: ${str(note.data.used)} of ${str(note.data.limit)}`;
    case 'write-back':
      return `Write-back ${note.data.status} (${note.data.nodeId})${note.data.error === undefined ? '' : `: ${note.data.error}`}`;
    case 'upstream-log':
      return preview(`[${note.data.upstream} ${note.data.level}] ${note.data.message}`, 400);
    case 'artifact-map':
      return `Mapped ${note.data.artifact.id} in ${str(note.data.chunks)} chunks, ${formatCount(note.data.usage.totalTokens)} tokens`;
    case 'code-start':
      return `Program${note.data.replay === true ? ' run again from its start after a restart' : ''}: ${preview(note.data.code, 300)}`;
    case 'code-call': {
      const { call, name, target, durationMs, bytes, usage, replayed, error } = note.data;
      const what = `Program call ${str(call)}: ${name}${target === undefined ? '' : ` ${target}`}`;
      const spent = usage === undefined ? '' : `, ${formatCount(usage.totalTokens)} tokens`;
      const from = replayed === true ? " (from the task's record)" : '';
      return error === undefined
        ? `${what}, ${formatDuration(durationMs)}, ${formatCount(bytes)} bytes${spent}${from}`
        : `${what} failed${from}: ${preview(error, 300)}`;
    }
    case 'code-log':
      return `Program log: ${preview(note.data.text, 400)}`;
    case 'code-end': {
      const { calls, elapsedMs, bytes, error } = note.data;
      const ended = `Program ended after ${str(calls)} host calls, ${formatDuration(elapsedMs)}`;
      return error === undefined ? `${ended}: ${formatCount(bytes ?? 0)} bytes answered` : `${ended} — ${preview(error, 300)}`;
    }
    case 'history-compacted':
      return `Compacted the conversation: ${str(note.data.results)} results moved to artifacts, ${str(note.data.steps)} steps folded into a digest (${formatCount(note.data.tokensBefore)} → ${formatCount(note.data.tokensAfter)} tokens)`;
    default:
      return preview(note.data, 200);
  }
}

function toolView(call: TimelineToolCall): Html {
  const outcome =
    call.outcome === 'running'
      ? html`<span class="outcome">running…</span>`
      : call.outcome === 'ok'
        ? html`<span class="outcome">ok</span>`
        : html`<span class="outcome">${call.outcome === 'denied' ? 'denied' : 'error'}</span>`;
  const detail = call.error ?? call.preview;
  return html`<li class="tool tool-${call.outcome}">
    <div class="tool-head">
      <code class="tool-name">${call.toolName}</code> ${outcome}
      <span class="meta">${call.durationMs === undefined ? '' : formatDuration(call.durationMs)}</span>
    </div>
    <div class="args"><span class="label">args</span> <code>${preview(call.args ?? {}, 240)}</code></div>
    ${detail === undefined ? '' : html`<div class="${call.outcome === 'ok' ? 'result' : 'error'}"><span class="label">${call.outcome === 'ok' ? 'result' : call.outcome}</span> ${preview(detail, 400)}</div>`}
  </li>`;
}

function stepView(step: TimelineStep): Html {
  const { llm, end } = step;
  return html`<li class="step" data-step="${step.step}">
    <div class="step-head">
      <h3>Step ${step.step}</h3>
      ${
        end === undefined
          ? html`<span class="meta">running…</span>`
          : html`<span class="meta"
              >run so far ${formatDuration(end.elapsedMs)} · ${formatCount(end.usage.totalTokens)}
              tokens${end.costUsd === undefined ? '' : ` · ${formatCost(end.costUsd)}`}</span
            >`
      }
    </div>
    ${
      llm === undefined
        ? ''
        : html`<div class="llm">
            <div>
              <span class="label">LLM call</span>
              <span class="meta"
                >${llm.durationMs === undefined ? 'waiting for the model…' : formatDuration(llm.durationMs)}${llm.usage === undefined ? '' : ` · ${tokens(llm.usage)}`}${llm.finishReason === undefined ? '' : ` · ${llm.finishReason}`}</span
              >
            </div>
            ${llm.text === undefined ? '' : html`<p class="llm-text">${preview(llm.text, 600)}</p>`}
          </div>`
    }
    ${
      step.tools.length === 0
        ? ''
        : html`<ul class="tools">
            ${step.tools.map(toolView)}
          </ul>`
    }
  </li>`;
}

/** An artifact kept: its size, its first lines, and a link to page through it. */
function artifactNote(note: Extract<TimelineNote, { readonly type: 'artifact-kept' }>, taskId: string): Html {
  const { artifact, head } = note.data;
  return html`<li class="note note-artifact-kept" data-artifact="${artifact.id}">
    <time datetime="${note.time}">${formatTime(note.time).slice(11)}</time> Kept the result of <code>${artifact.tool}</code> as artifact
    <a href="/dashboard/tasks/${taskId}/artifacts/${artifact.id}"><code>${artifact.id}</code></a
    >: ${formatCount(artifact.bytes)} bytes, ${formatCount(artifact.lines)} lines, ${formatCount(artifact.tokens)} tokens
    <pre class="artifact-head">${head.map((line) => (typeof line === 'string' ? line : '')).join('\n')}</pre>
  </li>`;
}

/** A task's timeline: its steps as cards, and the task's own notes between them, oldest first. */
export function timelineView(items: readonly TimelineItem[], dropped: number, taskId: string): Html {
  return html`<ol class="timeline">
    ${dropped > 0 ? html`<li class="note dropped">${dropped} older log entries were dropped to keep the log bounded; the timeline starts after them.</li>` : ''}
    ${items.map((item) =>
      item.kind === 'step'
        ? stepView(item)
        : item.type === 'artifact-kept'
          ? artifactNote(item, taskId)
          : html`<li class="note note-${item.type}"><time datetime="${item.time}">${formatTime(item.time).slice(11)}</time> ${noteText(item)}</li>`,
    )}
  </ol>`;
}
