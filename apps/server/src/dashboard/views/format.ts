import type { HtmlEscapedString } from 'hono/utils/html';

/** What a view renders: Hono's escaped HTML (every interpolated string is escaped by `html`). */
export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** `340 ms`, `1.2 s`, `3 min 5 s`. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1_000);
  return seconds < 3_600 ? `${Math.floor(seconds / 60)} min ${seconds % 60} s` : `${Math.floor(seconds / 3_600)} h ${Math.floor((seconds % 3_600) / 60)} min`;
}

/** `12,345`. */
export const formatCount = (value: number): string => value.toLocaleString('en-US');

/** `$0.0012`. */
export const formatCost = (usd: number | undefined): string => (usd === undefined ? '—' : `$${usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2)}`);

/** An ISO time as `2026-01-02 13:04:05` (UTC, as the server and its logs keep it). */
export const formatTime = (iso: string | undefined): string => (iso === undefined ? '—' : iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, ''));

/** `value` as one line of at most `max` characters: strings as they are, anything else as JSON. */
export function preview(value: unknown, max: number): string {
  const text = (typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value))).replace(/\s+/g, ' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
