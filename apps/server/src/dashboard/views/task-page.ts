import { isTerminal, type TaskInput, type TaskLogPage, type TaskStatusView } from '@klym/core';
import { viewLogPage } from '@klym/core/server';
import { html } from 'hono/html';
import type { TimelineItem } from '../timeline.ts';
import { formatCost, formatCount, formatDuration, formatTime, type Html } from './format.ts';
import { statusBadge } from './task-list.ts';
import { inputSection } from './task-input.ts';
import { timelineView } from './timeline-view.ts';

/** What the task page shows: the status view, whose task it is, and its timeline from the whole log. */
export interface TaskPageData {
  readonly status: TaskStatusView;
  readonly principal: string;
  readonly timeline: readonly TimelineItem[];
  /** Entries dropped from the front of the bounded log. */
  readonly dropped: number;
  /** Whether it may still change (running, or its write-back under way): the page then keeps it live. */
  readonly live: boolean;
  /** While it is `input_required`: what it waits for (its question, or the call to approve). */
  readonly input?: TaskInput;
  /** Whether the viewer may answer it: the task's own principal. */
  readonly mayAnswer?: boolean;
}

const count = (value: number | undefined): string => (value === undefined ? '—' : formatCount(value));

/** One budget: what was used beside its limit, as a meter (none when unlimited). */
function budgetRow(label: string, used: number | undefined, limit: number | undefined, format: (value: number | undefined) => string): Html {
  return html`<tr>
    <th>${label}</th>
    <td>${format(used)}</td>
    <td>${limit === undefined ? 'no limit' : html`of ${format(limit)}`}</td>
    <td>
      ${
        limit === undefined || used === undefined
          ? ''
          : html`<meter min="0" max="${limit}" value="${Math.min(used, limit)}" high="${limit * 0.8}">${Math.round((used / limit) * 100)}%</meter>`
      }
    </td>
  </tr>`;
}

/** The task page's live part: header, cancel button, what it waits for (with the form that answers it), budget, result and timeline; it re-renders itself while the task runs. */
export function taskPart(data: TaskPageData): Html {
  const { status } = data;
  const id = status.task_id;
  const running = !isTerminal(status.status);
  const { budget } = status;
  return html`<section id="task" data-status="${status.status}" ${data.live ? html` data-live="/dashboard/parts/tasks/${id}"` : ''}>
    <div class="task-head">
      <h1>Task <code>${id}</code> ${statusBadge(status.status)}</h1>
      ${running ? html`<form method="post" action="/dashboard/tasks/${id}/cancel" class="cancel"><button type="submit" class="danger">Cancel task</button></form>` : ''}
    </div>
    <dl class="facts">
      <dt>Principal</dt>
      <dd>${data.principal}</dd>
      <dt>Model</dt>
      <dd>${status.model ?? 'default'}</dd>
      <dt>Step</dt>
      <dd class="current-step">${status.step}</dd>
      <dt>Created (UTC)</dt>
      <dd>${formatTime(status.created_at)}</dd>
      <dt>Started</dt>
      <dd>${formatTime(status.started_at)}</dd>
      <dt>Finished</dt>
      <dd>${formatTime(status.finished_at)}</dd>
      ${
        status.resumed_from === undefined
          ? ''
          : html`<dt>Resumed after steps</dt>
              <dd>${status.resumed_from.join(', ')}</dd>`
      }
    </dl>
    ${status.status === 'input_required' && data.input !== undefined ? inputSection(id, data.input, data.mayAnswer === true) : ''}
    <h2>Budget</h2>
    <table class="budget">
      ${budgetRow('Steps', budget.steps, budget.max_steps, count)} ${budgetRow('Tokens', budget.tokens, budget.max_tokens, count)}
      ${budgetRow('Cost', budget.cost_usd, budget.max_cost_usd, formatCost)} ${budgetRow('Time', status.elapsed_ms, budget.timeout_ms, formatDuration)}
    </table>
    ${
      status.status === 'completed'
        ? html`<h2>Result</h2>
            <p class="finish">Finished: ${status.finish_reason ?? 'stop'}</p>
            <pre class="task-result">${status.result ?? ''}</pre>`
        : status.error !== undefined
          ? html`<h2>Error</h2>
              <p class="error-text"><code>${status.error.code}</code> ${status.error.message}</p>`
          : status.status === 'cancelled'
            ? html`<h2>Cancelled</h2>
                <p class="cancel-reason">${status.cancel_reason ?? 'cancelled'}</p>`
            : ''
    }
    ${status.write_back === undefined ? '' : html`<p class="write-back">Write-back: ${status.write_back.status} (${status.write_back.node_id})${status.write_back.error === undefined ? '' : `: ${status.write_back.error}`}</p>`}
    <h2>Timeline</h2>
    ${timelineView(data.timeline, data.dropped, id)}
  </section>`;
}

/** Log entries as one line each (the summaries `check_task_status` gives). */
export function logRows(page: TaskLogPage): Html {
  return html`${viewLogPage(page, false).entries.map(
    (entry) =>
      html`<li data-seq="${entry.seq}">
        <span class="seq">#${entry.seq}</span> <span class="type">${entry.type}</span> <span class="text">${entry.text}</span>
      </li>`,
  )}`;
}

/** The log: the entries so far, and while the task runs, the URL the page's script tails for newer ones. */
export function logSection(id: string, page: TaskLogPage, live: boolean): Html {
  return html`<section class="log-section">
    <h2>Log</h2>
    <ol id="log" class="log" data-after="${page.nextCursor}" ${live ? html` data-tail="/dashboard/parts/tasks/${id}/log"` : ''}>
      ${logRows(page)}
    </ol>
  </section>`;
}
