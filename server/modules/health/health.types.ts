export type HealthCheckDTO = {
  readonly ok: boolean;
  readonly latencyMs: number;
  /** A category only ("timeout", "unreachable", "no live worker"): the endpoint is unauthenticated. */
  readonly error?: string;
};

export type HealthReportDTO = {
  readonly status: "ok" | "unavailable";
  readonly checkedAt: string;
  readonly checks: {
    readonly database: HealthCheckDTO;
    readonly redis: HealthCheckDTO;
    readonly workers: HealthCheckDTO & { readonly alive: number };
  };
};
