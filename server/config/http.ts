import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZHttpEnv = z.object({
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  // Loopback by default: exposing the dashboard to the network is a decision, not an accident.
  HOST: z.string().default("127.0.0.1"),
  // The URL users and cookies see (behind a proxy it differs from HOST:PORT).
  BERTH_BASE_URL: z.url().optional(),
});

export type HttpConfig = { readonly port: number; readonly host: string; readonly baseUrl: string };

export function loadHttpConfig(env: RawEnv = readProcessEnv()): HttpConfig {
  const parsed = parseEnv(ZHttpEnv, env, "http");
  const baseUrl = parsed.BERTH_BASE_URL ?? `http://localhost:${parsed.PORT}`;
  return { port: parsed.PORT, host: parsed.HOST, baseUrl: baseUrl.replace(/\/+$/, "") };
}
