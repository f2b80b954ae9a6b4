// Types of hookinbox-keys (index.js).

export class KeysError extends Error {}
/** hookinbox could not be reached, or answered 5xx (a standby, a full disk). */
export class HookinboxUnavailable extends KeysError {}
/** Another worker holds the key (onBusy "raise", or waitTimeout passed). */
export class KeyBusy extends KeysError {
  key: string;
  retryAfter: number | null;
}
/** The lease was lost while the work ran: the work may have run twice. */
export class StaleFence extends KeysError {
  key: string;
  token: number | null;
}

/** "30s", "5m", "7d", "500ms", or seconds. */
export type Duration = string | number;
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function seconds(value: Duration): number;

/** What the work receives after its own arguments. */
export interface WorkContext {
  /** Aborted when the heartbeat finds the lease lost. */
  signal: AbortSignal;
  /** The fencing token of this claim (null when run fail-open). */
  token: number | null;
}

export interface IdempotentOptions<A extends unknown[]> {
  /** A function of the arguments, "json:/pointer" into the first, or a fixed key. */
  key: string | ((...args: A) => string);
  lease?: Duration;
  ttl?: Duration;
  onBusy?: 'wait' | 'raise';
  waitTimeout?: Duration;
  onError?: 'release' | 'keep';
  failOpen?: boolean;
  heartbeat?: boolean;
}

export class Claim {
  readonly key: string;
  state: 'claimed' | 'done' | 'busy';
  token: number | null;
  lease: number;
  result: Json;
  retryAfter: number | null;
  readonly signal: AbortSignal;
  extend(lease?: Duration): Promise<void>;
  complete(result?: unknown): Promise<void>;
  release(): Promise<void>;
  run<R>(work: (ctx: WorkContext) => R | Promise<R>, options?: { onError?: 'release' | 'keep'; heartbeat?: boolean }): Promise<Json>;
}

export class Keys {
  /** `socketPath` (default: $HOOKINBOX_KEYS_SOCKET): call over this Unix domain socket instead of `url`'s TCP. */
  constructor(options?: { url?: string; token?: string; socketPath?: string; timeoutMs?: number });
  get(key: string): Promise<Record<string, Json> | null>;
  claim(key: string, options?: { lease?: Duration; ttl?: Duration }): Promise<Claim>;
  /** `work(...args, ctx)` once per key: one overload per number of arguments. */
  idempotent<R>(work: (ctx: WorkContext) => R | Promise<R>, options: IdempotentOptions<[]>): () => Promise<Json>;
  idempotent<T1, R>(
    work: (a: T1, ctx: WorkContext) => R | Promise<R>,
    options: IdempotentOptions<[T1]>,
  ): (a: T1) => Promise<Json>;
  idempotent<T1, T2, R>(
    work: (a: T1, b: T2, ctx: WorkContext) => R | Promise<R>,
    options: IdempotentOptions<[T1, T2]>,
  ): (a: T1, b: T2) => Promise<Json>;
  idempotent<T1, T2, T3, R>(
    work: (a: T1, b: T2, c: T3, ctx: WorkContext) => R | Promise<R>,
    options: IdempotentOptions<[T1, T2, T3]>,
  ): (a: T1, b: T2, c: T3) => Promise<Json>;
}
