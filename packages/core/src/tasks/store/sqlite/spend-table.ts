import type { DatabaseSync } from 'node:sqlite';
import type { DaySpend } from '../task-types.ts';

/** Days of spend kept: a daily quota reads only today's, the rest is for whoever looks back. */
const KEPT_DAYS = 35;

/** Each principal's spend per day, in the `spend` table (version 6); every method is synchronous, as the connection is. */
export interface SpendTable {
  add(principal: string, day: string, spend: DaySpend): DaySpend;
  of(principal: string, day: string): DaySpend;
}

/** A row of the table, or none, as a {@link DaySpend}. */
function total(row: unknown): DaySpend {
  const { tokens, usd } = (row ?? { tokens: 0, usd: 0 }) as { tokens: number | bigint; usd: number };
  return { tokens: Number(tokens), usd: Number(usd) };
}

/** Creates the {@link SpendTable} of `db`. */
export function createSpendTable(db: DatabaseSync): SpendTable {
  // One statement adds and answers the total: atomic without a transaction of its own.
  const add = db.prepare(
    `INSERT INTO spend (principal, day, tokens, usd) VALUES (?, ?, ?, ?)
     ON CONFLICT (principal, day) DO UPDATE SET tokens = tokens + excluded.tokens, usd = usd + excluded.usd
     RETURNING tokens, usd`,
  );
  const select = db.prepare('SELECT tokens, usd FROM spend WHERE principal = ? AND day = ?');
  const forget = db.prepare('DELETE FROM spend WHERE day < ?');
  let lastDay = '';
  return {
    add(principal, day, spend) {
      // Once a day, the days too old to keep go (the table stays a few rows per principal).
      if (day !== lastDay) {
        lastDay = day;
        forget.run(new Date(Date.parse(`${day}T00:00:00Z`) - KEPT_DAYS * 86_400_000).toISOString().slice(0, 10));
      }
      return total(add.get(principal, day, Math.round(spend.tokens), spend.usd));
    },
    of: (principal, day) => total(select.get(principal, day)),
  };
}
