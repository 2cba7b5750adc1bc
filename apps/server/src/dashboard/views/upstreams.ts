import type { UpstreamStatus } from '@klym/core';
import type { CallTotals } from '../../metrics/klym-metrics.ts';
import { html } from 'hono/html';
import { formatCount, formatDuration, formatTime, preview, type Html } from './format.ts';

/** The upstreams' live part: each upstream's state, breaker, sessions, calls and latency, last error; it re-renders itself. */
export function upstreamsPart(
  status: Readonly<Record<string, UpstreamStatus>>,
  { tasksRunHere, callTotals }: { readonly tasksRunHere: boolean; readonly callTotals?: ReadonlyMap<string, CallTotals> },
): Html {
  const names = Object.keys(status).toSorted();
  const rows = names.map((name) => {
    const upstream = status[name] as UpstreamStatus;
    const { breaker, sessions, lastError } = upstream;
    // Every call of this process when the server counts them (its runner thread's too), else its pool's own.
    const calls = callTotals === undefined ? upstream.calls : (callTotals.get(name) ?? { succeeded: 0, failed: 0, totalMs: 0 });
    const ended = calls.succeeded + calls.failed;
    return html`<tr data-upstream="${name}">
      <th scope="row">${name}</th>
      <td>
        <span class="badge state-${upstream.state}">${upstream.state}</span
        >${upstream.reason === undefined ? '' : html` <span class="meta">${upstream.reason}</span>`}
      </td>
      <td>${upstream.transport}</td>
      <td>
        <span class="badge breaker-${breaker.state}">${breaker.state}</span>${
          breaker.consecutiveFailures > 0 || breaker.opens > 0
            ? html` <span class="meta">${breaker.consecutiveFailures} failing, opened ${breaker.opens}×</span>`
            : ''
        }${breaker.nextProbeAt === undefined ? '' : html` <span class="meta">next probe ${formatTime(breaker.nextProbeAt).slice(11)}</span>`}
      </td>
      <td class="num">${sessions.live}</td>
      <td class="num">${sessions.borrowed}</td>
      <td class="num">${sessions.waiting}</td>
      <td class="num">${formatCount(calls.succeeded)}</td>
      <td class="num">${formatCount(calls.failed)}</td>
      <td class="num">${upstream.calls.inFlight}</td>
      <td class="num">${ended === 0 ? '—' : formatDuration(calls.totalMs / ended)}</td>
      <td class="last-error">
        ${lastError === undefined ? '—' : html`<code>${lastError.code}</code> ${preview(lastError.message, 200)} <span class="meta">${formatTime(lastError.at)}</span>`}
      </td>
    </tr>`;
  });
  return html`<section id="upstreams" data-live="/dashboard/parts/upstreams">
    ${
      names.length === 0
        ? html`<p class="empty">No upstreams are configured.</p>`
        : html`<table class="upstreams">
            <thead>
              <tr>
                <th>Upstream</th>
                <th>State</th>
                <th>Transport</th>
                <th>Breaker</th>
                <th>Sessions live</th>
                <th>Busy</th>
                <th>Waiting</th>
                <th>Calls ok</th>
                <th>Failed</th>
                <th>In flight</th>
                <th>Mean latency</th>
                <th>Last error</th>
              </tr>
            </thead>
            <tbody>
              ${rows}
            </tbody>
          </table>`
    }
    <p class="meta">
      ${
        tasksRunHere || callTotals === undefined
          ? tasksRunHere
            ? 'The sessions and calls of this process’s pool, which its tasks run on.'
            : 'The sessions and calls of this process’s own pool: what the server itself calls (tool listings, write-back). Its tasks run elsewhere (the runner thread, or workers), over pools of their own.'
          : 'Calls and latency: every tool call this process made, its runner thread’s included (a front’s tasks run on its workers, which count their own). Sessions and calls in flight: this process’s own pool.'
      }
    </p>
  </section>`;
}
