/** The loopback host names, always allowed in `Host` and `Origin`. */
export const LOOPBACK = ['localhost', '127.0.0.1', '::1'];

/** Whether `host` is a loopback address or name. */
export function isLoopback(host: string): boolean {
  const name = host.replace(/^\[|\]$/g, '').toLowerCase();
  return LOOPBACK.includes(name) || /^127\.\d+\.\d+\.\d+$/.test(name);
}
