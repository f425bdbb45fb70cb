export type HealthCheckDTO = {
  readonly ok: boolean;
  readonly latencyMs: number;
  /** A category only ("timeout", "unreachable", "no live worker", "missing scheduler"): the endpoint is unauthenticated. */
  readonly error?: string;
};

export type HealthReportDTO = {
  readonly status: "ok" | "unavailable";
  readonly checkedAt: string;
  readonly checks: {
    readonly database: HealthCheckDTO;
    readonly redis: HealthCheckDTO;
    readonly workers: HealthCheckDTO & { readonly alive: number };
    /** Job schedulers (sweep, reconcile, audit flush) missing from Redis, by id (null: unknown). */
    readonly schedulers: HealthCheckDTO & { readonly missing: readonly string[] | null };
    /** Audit entries waiting for a flush, and how many were ever set aside as unstorable (null: unknown). */
    readonly audit: HealthCheckDTO & {
      readonly pending: number | null;
      readonly deadLettered: number | null;
    };
  };
};
