/** Per-minute, per-day and (optional) per-month allowances of one API key. */
export interface WindowLimits {
  perMinute: number;
  perDay: number;
  /** Units per billing month; absent, the key has no month window (CONTRACT §4). */
  perMonth?: number;
  /**
   * A key's own limits only: `true` shadows them (counted and reported, never enforced), `false`
   * enforces them even on a shadowed plan; absent, the key follows its plan.
   */
  shadow?: boolean;
  /**
   * A key's own limits only: requests of the key being forwarded at once, across the instances on
   * one Redis (1..10,000; CONTRACT §3). Absent, the plan's `maxInFlight`, if any.
   */
  maxInFlight?: number;
  /**
   * A key's own limits only: windows enforced but shown in no header (CONTRACT §4, hidden-windows.ts).
   * Absent, the plan's list, if any; an empty list shows them all.
   */
  hiddenWindows?: WindowName[];
}

export type WindowName = 'minute' | 'day' | 'month';

/** A consumer's windows, shared by all its keys (CONTRACT §4), as headers and refusals name them. */
export type ConsumerWindowName = 'consumer-minute' | 'consumer-day' | 'consumer-month';

/** Any window that can refuse a key's request: its own, or its consumer's. */
export type RefusingWindow = WindowName | ConsumerWindowName;

/** A consumer's own limits: any of the three windows, each absent when the consumer has none. */
export interface ConsumerWindowLimits {
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  /** Which of the consumer's windows are hidden: `minute` hides `consumer-minute`, and so on (hidden-windows.ts). */
  hiddenWindows?: WindowName[];
}

/** The consumer whose windows a request of its key also takes units of. */
export interface ConsumerShare {
  id: string;
  limits: ConsumerWindowLimits;
  /** The consumer's own billing day (1..28), where its month window starts. */
  billingDay: number;
}

/** A consumer's windows after a decision, those it has limits for. */
export interface ConsumerWindows {
  minute?: WindowState;
  day?: WindowState;
  month?: MonthWindowState;
}

/**
 * Shape of the per-minute window (config `rateLimit.minuteWindow`). `fixed`: UTC minutes, a client
 * may send twice its limit across a boundary. `sliding`: no 60-second interval admits more than the
 * limit (an exact log of admission times). The day window is always fixed.
 */
export type MinuteWindowShape = 'fixed' | 'sliding';

/** How a consume treats a refusal. */
export interface ConsumeOptions {
  /**
   * Shadow mode (a plan's or key's `shadow: true`): a refusal is reported as usual but does not
   * count toward a ban, since the gateway forwards the request anyway.
   */
  shadow?: boolean;
  /** Units this request takes of every window (config `costs`); default 1. */
  cost?: number;
  /** The key's billing day (1..28), where its month window starts; default 1. */
  billingDay?: number;
  /**
   * The key's consumer with limits of its own: the request is admitted only if the key's and the
   * consumer's windows all have room, and then counts in all, in the same one decision.
   */
  consumer?: ConsumerShare;
  /** The key's concurrency limit: admitted, the request holds one slot (a lease) until released. */
  inFlight?: InFlightLease;
}

/** One request's slot under a key's maxInFlight (in-flight-leases.ts). */
export interface InFlightLease {
  /** The key's maxInFlight. */
  max: number;
  /** Unique per request; what `release` names. */
  id: string;
  /** The slot frees itself after this long if never released (an instance that died): upstream.timeoutMs + 1 s. */
  ttlMs: number;
}

/** One window as a client sees it in the rate-limit headers. */
export interface WindowState {
  limit: number;
  remaining: number;
  /** Epoch milliseconds at which this window starts afresh. */
  resetAt: number;
}

/** The month window: its limit counts the month's credits too, and it knows its start (its length varies). */
export interface MonthWindowState extends WindowState {
  /** Epoch ms of 00:00 UTC on the billing day this month started. */
  startAt: number;
  /** Units granted on top of perMonth for this month (POST /admin/keys/{id}/credits). */
  credits: number;
}

export interface BanSettings {
  /** Refusals (429) tolerated within `windowSeconds`; one more bans the key. */
  threshold: number;
  windowSeconds: number;
  durationSeconds: number;
}

/** How a decision was taken without the shared store: `local` counts in this process, `open` admits all. */
export type FallbackKind = 'local' | 'open';

interface DecisionSource {
  /** Set when the decision was taken without the shared store (store.failMode `local` or `open`). */
  fallback?: FallbackKind;
}

export type KeyDecision = DecisionSource &
  (
    | {
        outcome: 'allowed';
        minute: WindowState;
        day: WindowState;
        /** Present when the key's limits have perMonth. */
        month?: MonthWindowState;
        /** The consumer's windows, when the request was decided with a consumer's (ConsumeOptions.consumer). */
        consumer?: ConsumerWindows;
        /** Epoch ms of the decision, from the store's clock (Redis TIME with Redis). */
        now: number;
        /**
         * Leases (src/limits/leases/): units the store counted in every window beyond this request's
         * cost, for a lease this request took. The windows above leave them out (they show what
         * requests used); a threshold is passed at the take, counting them.
         */
        leaseUnits?: number;
        /** Admitted from this instance's lease of the key, with no store round trip (windows: leaseWindowViews). */
        fromLease?: boolean;
      }
    | {
        outcome: 'limited';
        /** The window(s) that refused; the request consumed nothing. */
        refusedBy: RefusingWindow;
        minute: WindowState;
        day: WindowState;
        month?: MonthWindowState;
        consumer?: ConsumerWindows;
        /** Milliseconds until the binding window frees a unit. */
        retryAfterMs: number;
        /** True when this refusal pushed the key over the ban threshold. */
        bannedNow: boolean;
        now: number;
      }
    | {
        outcome: 'banned';
        /** Epoch ms when the ban ends. */
        bannedUntil: number;
        now: number;
      }
    | {
        /** The key's maxInFlight requests are being forwarded already; nothing was consumed or counted toward a ban. */
        outcome: 'concurrency_limited';
        /** The windows as they stand (for the headers). */
        minute: WindowState;
        day: WindowState;
        month?: MonthWindowState;
        /** The consumer's windows as they stand, when the key has a consumer with limits. */
        consumer?: ConsumerWindows;
        now: number;
      }
  );

/** Units each window held when it was reset (window-reset.ts); only the windows reset. */
export type WindowsHeld = Partial<Record<WindowName, number>>;

/** What the admin API shows for a key: its windows without consuming, and any ban. */
export interface KeyUsage {
  minute: WindowState;
  day: WindowState;
  month?: MonthWindowState;
  bannedUntil: number | null;
}

/**
 * Which key's windows a limiter call is about: the key, and the consumer it belongs to (absent: none).
 * A consumer's key keeps its windows beside its consumer's; where and how is each store's business
 * (the Redis store names them in redis/redis-names.ts), so callers pass this, never a store's name.
 */
export interface KeyRef {
  keyId: string;
  consumerId?: string;
}

/**
 * Per-key windows and bans. Minute windows are aligned to the UTC minute (or slide, see
 * MinuteWindowShape), day windows to the UTC calendar day. `consume` decides both windows and the ban together, atomically, in at most one
 * store round trip; a refused request consumes nothing.
 */
export interface KeyLimiter {
  consume(key: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision>;
  usage(key: KeyRef, limits: WindowLimits, billingDay?: number): Promise<KeyUsage>;
  /**
   * Adds `units` to the key's current month (billingDay as in ConsumeOptions); they expire with the
   * month. The caller checks that the key has a month window.
   */
  addCredits(key: KeyRef, units: number, billingDay?: number): Promise<void>;
  unban(key: KeyRef): Promise<void>;
  /**
   * Sets the named windows of a key back to zero (POST /admin/keys/{id}/windows/reset) in one step
   * with respect to consumes, and answers what each held just before. A month keeps its credits.
   * The caller checks that the key has the windows it names.
   */
  resetWindows(key: KeyRef, windows: readonly WindowName[], billingDay?: number): Promise<WindowsHeld>;
  /** The same for a consumer's windows (its own billing day); the caller checks it has them. */
  resetConsumerWindows(consumer: ConsumerShare, windows: readonly WindowName[]): Promise<WindowsHeld>;
  /** A consumer's windows as they stand, consuming nothing (the admin API, GET /v1/usage). */
  consumerUsage(consumer: ConsumerShare): Promise<ConsumerWindows>;
  /** Adds `units` to the consumer's current month (its own billing day); the caller checks it has one. */
  addConsumerCredits(consumer: ConsumerShare, units: number): Promise<void>;
  /**
   * Moves a key's windows, month and ban from where they were kept under one consumer (or none) to
   * where they are kept under another (a key that changes consumer: `from` and `to` name the same
   * key), adding to what the target already holds. Idempotent enough to run twice.
   */
  moveWindows(from: KeyRef, to: KeyRef): Promise<void>;
  /** Frees a slot taken with ConsumeOptions.inFlight; fire and forget (an unknown lease is no error). */
  release(key: KeyRef, leaseId: string): void;
  /** Keys banned right now, across every instance that shares the store (`gateway_active_bans`). */
  activeBans(): Promise<number>;
  close(): Promise<void>;
}

/** Per-client-address limit for requests without a valid key. */
export interface AddressDecision extends DecisionSource {
  allowed: boolean;
  window: WindowState;
  retryAfterMs: number;
}

export interface AddressConsumeOptions {
  /**
   * The request carried a key this instance proved was never issued (a flood of made-up keys): the
   * unit may come from a batch reserved in the shared store beforehand (address-reservations.ts).
   */
  neverIssuedKey?: boolean;
}

export interface AddressLimiter {
  consume(address: string, options?: AddressConsumeOptions): Promise<AddressDecision>;
  /** The address's window as it stands, counting nothing (for a known key's 401, which costs no quota). */
  peek(address: string): Promise<WindowState>;
}
