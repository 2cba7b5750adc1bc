import type { PrincipalUsage } from '@klym/core';
import { html } from 'hono/html';
import type { OtherPrincipalsUse } from '../../metrics/principal-use.ts';
import { formatCost, formatCount, formatTime, type Html } from './format.ts';

/** What the quotas page shows: the viewer's own use, or for an admin every configured principal's and the others' together. */
export interface PrincipalsData {
  readonly rows: readonly PrincipalUsage[];
  /** Every principal the configuration does not name (OAuth subjects, A2A agents), summed: an admin's view only. */
  readonly others?: OtherPrincipalsUse;
  readonly admin: boolean;
}

/** One use beside its limit: `3 of 5`, or the use alone where there is no limit. */
function useCell(kind: string, used: number, limit: number | undefined, format: (value: number) => string): Html {
  return html`<td class="num ${kind}">
    <span class="used">${format(used)}</span>${limit === undefined ? '' : html` <span class="limit meta">of ${format(limit)}</span>`}
  </td>`;
}

/**
 * The quotas page's live part: each principal's tasks running and waiting, what its runs spent today (UTC),
 * each beside its limit (`tasks.perPrincipal`); it re-renders itself while the page is open.
 */
export function principalsPart(data: PrincipalsData): Html {
  const rows = data.rows.map(
    (usage) =>
      html`<tr data-principal="${usage.principal}">
        <th scope="row">${usage.principal}</th>
        ${useCell('running', usage.running, usage.limits.maxRunning, formatCount)} ${useCell('queued', usage.queued, usage.limits.maxQueued, formatCount)}
        ${useCell('tokens', usage.today.spent.tokens, usage.limits.maxTokensPerDay, formatCount)}
        ${useCell('usd', usage.today.spent.usd, usage.limits.maxUsdPerDay, (usd) => formatCost(usd))}
      </tr>`,
  );
  const { others } = data;
  const resetsAt = data.rows[0]?.today.resetsAt;
  return html`<section id="principals" data-live="/dashboard/parts/principals">
    <table class="principals">
      <thead>
        <tr>
          <th>Principal</th>
          <th>Running</th>
          <th>Queued</th>
          <th>Tokens today</th>
          <th>Cost today</th>
        </tr>
      </thead>
      <tbody>
        ${rows}${
          others === undefined
            ? ''
            : html`<tr data-principal="other" class="others">
                <th scope="row">Other principals <span class="meta">(OAuth subjects, A2A agents)</span></th>
                ${useCell('running', others.running, undefined, formatCount)} ${useCell('queued', others.queued, undefined, formatCount)}
                <td class="num tokens">—</td>
                <td class="num usd">—</td>
              </tr>`
        }
      </tbody>
    </table>
    <p class="meta">
      ${
        data.admin
          ? 'Every principal of the configuration (its tokens and its tasks.perPrincipal overrides); the others together, their limits each their own.'
          : 'Your tasks now and what your runs spent today, beside your limits (tasks.perPrincipal).'
      }
      Spend counts from 00:00 UTC${resetsAt === undefined ? '' : html`; it starts again at <time datetime="${resetsAt}">${formatTime(resetsAt)}</time> UTC`}.
    </p>
  </section>`;
}
