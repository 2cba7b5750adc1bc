import { html } from 'hono/html';
import type { DashboardViewer } from '../dashboard-auth.ts';
import type { Html } from './format.ts';

/** What every page shares. */
export interface LayoutOptions {
  readonly title: string;
  /** The nav entry to mark. */
  readonly section?: 'tasks' | 'upstreams' | 'principals';
  /** Absent on the login page. */
  readonly viewer?: DashboardViewer;
  /** Whether there is a login (a logout button then). */
  readonly loginRequired: boolean;
  /** `?v=<hash>` of the assets, so that a browser never runs an old script with a new page. */
  readonly assetVersion: string;
}

/** A whole page: the header with its nav and who is logged in, then `body`. */
export function layout(options: LayoutOptions, body: Html): Html {
  const { viewer } = options;
  const navLink = (href: string, label: string, section: LayoutOptions['section']) =>
    html`<a href="${href}" ${section === options.section ? html` aria-current="page"` : ''}>${label}</a>`;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${options.title} · Klym</title>
        <link rel="stylesheet" href="/dashboard/assets/dashboard.css?v=${options.assetVersion}" />
        <script src="/dashboard/assets/dashboard.js?v=${options.assetVersion}" defer></script>
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/">Klym</a>
          ${viewer === undefined ? '' : html`<nav>${navLink('/', 'Tasks', 'tasks')}${navLink('/dashboard/upstreams', 'Upstreams', 'upstreams')}${navLink('/dashboard/principals', 'Quotas', 'principals')}</nav>`}
          ${
            viewer === undefined
              ? ''
              : html`<div class="who">
                  <span class="principal">${viewer.principal}</span>${viewer.admin ? html` <span class="badge admin">admin</span>` : ''}${
                    options.loginRequired ? html`<form method="post" action="/dashboard/logout"><button type="submit" class="link">Log out</button></form>` : ''
                  }
                </div>`
          }
        </header>
        <main>${body}</main>
      </body>
    </html>`;
}

/** A page that says what went wrong (not found, refused, bad request), with a way back. */
export function messagePage(options: LayoutOptions, heading: string, message: string): Html {
  return layout(
    options,
    html`<section class="message">
      <h1>${heading}</h1>
      <p>${message}</p>
      <p><a href="/">Back to the tasks</a></p>
    </section>`,
  );
}
