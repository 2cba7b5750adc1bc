/** Summary of a sample of durations in milliseconds. */
export interface Summary {
  readonly count: number;
  readonly median: number;
  readonly p99: number;
  readonly mean: number;
  readonly max: number;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = samples.toSorted((a, b) => a - b);
  const at = (quantile: number): number => sorted[Math.min(sorted.length - 1, Math.floor(quantile * sorted.length))] ?? Number.NaN;
  return {
    count: sorted.length,
    median: at(0.5),
    p99: at(0.99),
    mean: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
    max: sorted.at(-1) ?? Number.NaN,
  };
}

/**
 * Measures two contenders side by side: rounds alternate which goes first, so drift in the machine
 * (other load, CPU frequency, GC) falls on both alike.
 */
export async function sideBySide(
  rounds: number,
  perRound: number,
  contenders: { readonly a: () => Promise<unknown>; readonly b: () => Promise<unknown> },
): Promise<{ a: Summary; b: Summary }> {
  const samples = { a: [] as number[], b: [] as number[] };
  const measure = async (key: 'a' | 'b'): Promise<void> => {
    for (let index = 0; index < perRound; index++) {
      const started = performance.now();
      await contenders[key]();
      samples[key].push(performance.now() - started);
    }
  };
  for (let round = 0; round < rounds; round++) {
    const order: ('a' | 'b')[] = round % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
    for (const key of order) await measure(key);
  }
  return { a: summarize(samples.a), b: summarize(samples.b) };
}

export const ms = (value: number): string => `${value.toFixed(3)} ms`;
export const ratio = (value: number): string => `${value.toFixed(2)}×`;

/** One headline figure as a line a script can read: `figure <name> <value>`. */
export const figure = (name: string, value: number, digits = 2): string => `figure ${name} ${Number.isFinite(value) ? value.toFixed(digits) : 'NaN'}`;
