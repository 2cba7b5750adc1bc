import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from './circuit-breaker.ts';

function breakerAt(clock: { now: number }): CircuitBreaker {
  return new CircuitBreaker({ failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 4_000 }, () => clock.now);
}

describe('CircuitBreaker', () => {
  it('opens after the threshold of consecutive failures, and refuses attempts while open', () => {
    const clock = { now: 0 };
    const breaker = breakerAt(clock);
    breaker.failure();
    breaker.failure();
    expect(breaker.tryAttempt()).toBe(true);
    breaker.failure();
    expect(breaker.status()).toMatchObject({ state: 'open', consecutiveFailures: 3, opens: 1 });
    expect(breaker.tryAttempt()).toBe(false);
    expect(breaker.msUntilProbe).toBe(1_000);
  });

  it('a success in between resets the count', () => {
    const breaker = breakerAt({ now: 0 });
    breaker.failure();
    breaker.failure();
    breaker.success();
    breaker.failure();
    expect(breaker.state).toBe('closed');
  });

  it('lets exactly one probe through after the cooldown; success closes it', () => {
    const clock = { now: 0 };
    const breaker = breakerAt(clock);
    for (let failure = 0; failure < 3; failure++) breaker.failure();
    clock.now = 1_000;
    expect(breaker.tryAttempt()).toBe(true);
    expect(breaker.state).toBe('half-open');
    expect(breaker.tryAttempt()).toBe(false);
    breaker.success();
    expect(breaker.status()).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(breaker.tryAttempt()).toBe(true);
  });

  it('a failed probe opens it again for twice as long, up to the maximum', () => {
    const clock = { now: 0 };
    const breaker = breakerAt(clock);
    for (let failure = 0; failure < 3; failure++) breaker.failure();
    const waits: number[] = [];
    for (let probe = 0; probe < 4; probe++) {
      clock.now += breaker.msUntilProbe;
      expect(breaker.tryAttempt()).toBe(true);
      breaker.failure();
      waits.push(breaker.msUntilProbe);
    }
    expect(waits).toEqual([2_000, 4_000, 4_000, 4_000]);
    expect(breaker.status().opens).toBe(5);
  });

  it('counts a session that dies after connecting as a failure: the count and the cooldown carry on until a success', () => {
    const clock = { now: 0 };
    const breaker = breakerAt(clock);
    for (let attempt = 0; attempt < 3; attempt++) {
      expect(breaker.tryAttempt()).toBe(true);
      breaker.connected();
      breaker.failure();
    }
    expect(breaker.status()).toMatchObject({ state: 'open', consecutiveFailures: 3, opens: 1 });
    const waits: number[] = [breaker.msUntilProbe];
    for (let probe = 0; probe < 3; probe++) {
      clock.now += breaker.msUntilProbe;
      expect(breaker.tryAttempt()).toBe(true);
      breaker.connected();
      // Closed while the session lives: others may connect too.
      expect(breaker.tryAttempt()).toBe(true);
      breaker.failure();
      waits.push(breaker.msUntilProbe);
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 4_000]);
    clock.now += breaker.msUntilProbe;
    breaker.tryAttempt();
    breaker.connected();
    breaker.success();
    breaker.failure();
    expect(breaker.status()).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
  });
});
