// A number as a model or a person reads it in Klym's messages: digits grouped by commas, whatever the machine's locale.

/** `1234567` → `'1,234,567'` (en-US grouping). */
export const countText = (value: number): string => value.toLocaleString('en-US');
