import { TASK_STATUSES, type TaskListPage, type TaskStatus } from '@klym/core';
import { html } from 'hono/html';
import type { DashboardViewer } from '../dashboard-auth.ts';
import { formatTime, preview, type Html } from './format.ts';

/** The statuses the list filters by, in a task's order of life. */
export const STATUSES: readonly TaskStatus[] = TASK_STATUSES;

/** Which page of the list: a status filter and a cursor to older tasks. */
export interface TaskListQuery {
  readonly status?: TaskStatus;
  readonly cursor?: string;
}

const query = (params: Readonly<Record<string, string | undefined>>): string => {
  const defined = Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined);
  return defined.length === 0 ? '' : `?${new URLSearchParams(defined).toString()}`;
};

/** A status as a coloured badge. */
export const statusBadge = (status: TaskStatus): Html => html`<span class="badge status-${status}">${status}</span>`;

/** The filter tabs: all, then each status. */
export function statusFilter(current: TaskStatus | undefined): Html {
  const tab = (status: TaskStatus | undefined, label: string) =>
    html`<a href="/${query({ status })}" ${status === current ? html` aria-current="true"` : ''}>${label}</a>`;
  return html`<nav class="filter" aria-label="Filter by status">${tab(undefined, 'all')}${STATUSES.map((status) => tab(status, status))}</nav>`;
}

/**
 * The list's live part: a page of tasks, newest first, with the links to older ones; it re-renders itself
 * (`data-live`) while the page is open. An admin sees whose each task is.
 */
export function taskListPart(page: TaskListPage, listQuery: TaskListQuery, viewer: DashboardViewer): Html {
  const live = `/dashboard/parts/tasks${query({ status: listQuery.status, cursor: listQuery.cursor })}`;
  const rows = page.tasks.map(
    (task) =>
      html`<tr data-task-id="${task.id}">
        <td>
          <a href="/dashboard/tasks/${task.id}"><code>${task.id.slice(0, 12)}</code></a>
        </td>
        <td>${statusBadge(task.status)}</td>
        ${viewer.admin ? html`<td>${task.principal}</td>` : ''}
        <td class="prompt">${preview(task.request.prompt, 80)}</td>
        <td class="step">${preview(task.currentStep, 60)}</td>
        <td><time datetime="${task.createdAt}">${formatTime(task.createdAt)}</time></td>
      </tr>`,
  );
  return html`<section id="task-list" data-live="${live}">
    <p class="count">${page.total} ${page.total === 1 ? 'task' : 'tasks'}${listQuery.status === undefined ? '' : html` ${listQuery.status}`}</p>
    ${
      page.tasks.length === 0
        ? html`<p class="empty">No tasks${listQuery.status === undefined ? '' : ` ${listQuery.status}`} yet.</p>`
        : html`<table class="tasks">
            <thead>
              <tr>
                <th>Task</th>
                <th>Status</th>
                ${viewer.admin ? html`<th>Principal</th>` : ''}
                <th>Prompt</th>
                <th>Step</th>
                <th>Created (UTC)</th>
              </tr>
            </thead>
            <tbody>
              ${rows}
            </tbody>
          </table>`
    }
    <nav class="pages">
      ${listQuery.cursor === undefined ? '' : html`<a href="/${query({ status: listQuery.status })}">Newest</a>`}${
        page.nextCursor === undefined ? '' : html`<a href="/${query({ status: listQuery.status, cursor: page.nextCursor })}" rel="next">Older</a>`
      }
    </nav>
  </section>`;
}
