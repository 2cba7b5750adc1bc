// Klym's dashboard keeps its pages live without a framework: the server renders every piece of HTML, and
// this script only fetches pieces again. Each second, an element with `data-live` is replaced by what its
// URL answers now (a piece that will not change again comes without `data-live`, which ends its polling),
// and the log (`data-tail`) gets the entries after its `data-after` appended, until `X-Log-Done`.
(() => {
  'use strict';
  const INTERVAL_MS = 1000;
  let busy = false;

  /** The answer to a GET of `url`, or undefined when there is nothing to show; a lost login reloads the page, which asks for it. */
  async function get(url, element) {
    const response = await fetch(url, { headers: { accept: 'text/html' }, credentials: 'same-origin', cache: 'no-store' });
    if (response.status === 401) {
      location.reload();
      return undefined;
    }
    if (!response.ok) {
      // Gone (evicted) or refused: stop asking, and say the page is no longer live.
      delete element.dataset.live;
      delete element.dataset.tail;
      element.classList.add('stale');
      element.title = `No longer updated: the server answered ${response.status}`;
      return undefined;
    }
    return response;
  }

  /** Whether the reader is writing in a form of `element` (an answer to a task's question): it is not replaced under them. */
  function beingFilled(element) {
    const active = document.activeElement;
    if (active !== null && element.contains(active) && active.closest('form') !== null) return true;
    return [...element.querySelectorAll('textarea, input[type=text]')].some((field) => field.value !== '');
  }

  async function refresh(element) {
    if (beingFilled(element)) return;
    const response = await get(element.dataset.live, element);
    if (response === undefined) return;
    const template = document.createElement('template');
    template.innerHTML = await response.text();
    const next = template.content.firstElementChild;
    if (next !== null && element.isConnected) element.replaceWith(next);
  }

  async function tail(element) {
    const url = new URL(element.dataset.tail, location.href);
    url.searchParams.set('after', element.dataset.after ?? '0');
    const response = await get(url, element);
    if (response === undefined) return;
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    element.insertAdjacentHTML('beforeend', await response.text());
    element.dataset.after = response.headers.get('x-log-cursor') ?? element.dataset.after;
    if (response.headers.get('x-log-done') === '1') delete element.dataset.tail;
    // Follow the log as it grows, unless the reader scrolled up to read.
    if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  async function tick() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const live = [...document.querySelectorAll('[data-live]')].map(refresh);
      const tails = [...document.querySelectorAll('[data-tail]')].map(tail);
      await Promise.allSettled([...live, ...tails]);
    } finally {
      busy = false;
    }
  }

  setInterval(tick, INTERVAL_MS);
})();
