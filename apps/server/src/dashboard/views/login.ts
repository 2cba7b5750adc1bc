import { html } from 'hono/html';
import type { Html } from './format.ts';

/** The login form: a token, once; `next` is where to go after. */
export function loginForm(next: string, error: string | undefined): Html {
  return html`<section class="login">
    <h1>Log in</h1>
    <p>Paste your Klym token. The browser keeps only a session cookie; the token is not stored.</p>
    ${error === undefined ? '' : html`<p class="error-text" role="alert">${error}</p>`}
    <form method="post" action="/dashboard/login">
      <input type="hidden" name="next" value="${next}" />
      <label for="token">Token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
      <button type="submit">Log in</button>
    </form>
  </section>`;
}
