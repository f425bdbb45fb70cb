/**
 * THE composition root of a Berth process: `createBerth(config)` builds the database client, Redis, queues,
 * logger, workspace engine and every service ONCE and returns them as one object, the `Berth`. Whatever runs
 * in the process gets what it needs from it, passed down: scripts/berth-process.ts (`npm start`) and the
 * tRPC context (`ctx.berth`), the workers' runtime and processors (workers/main.ts), the CLI
 * (scripts/cli/main.ts), and the tests that start the app. Next's route handlers, which Next enters itself,
 * reach the same object through the one process-global handle (server/composition/process-berth.ts).
 *
 * Each member is built on its first use, at most once, in dependency order (config → logger, database,
 * Redis → queues → change feed, engine → holder → workspace services → agent services; auth over the
 * database), so a process pays only for what it uses: a worker process never builds the API's auth or the
 * agent services' dead-holder reaper, and a test that only queries the database opens no Redis connection.
 * `npm start` touches everything before Next serves its first request. `close()` closes, in reverse order,
 * what this root built, and nothing it was given.
 */
import { randomUUID } from "node:crypto";
import os from "node:os";
import type { Redis } from "ioredis";
import { type BerthAuth, createAuth } from "@/server/auth/auth";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { createSignInGuard, type SignInGuard } from "@/server/auth/sign-in-guard";
import type { BerthConfig } from "@/server/config/config";
import { createDatabaseClient, type Db } from "@/server/db";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { composeEngine } from "./compose-engine";
import { type EngineConfig, loadEngineConfig } from "@/server/engine/engine-config";
import { createLogger, type Logger } from "@/server/logger";
import {
  auditBufferDeps,
  auditRecorder,
  type AuditRecorder,
} from "@/server/modules/audit/audit-buffer.service";
import {
  type BackendSettingsService,
  createBackendSettingsService,
} from "@/server/modules/backend-settings/backend-settings.service";
import { createAgentServices, type AgentServices } from "@/server/modules/chat/chat.composition";
import { RedisCancelBus } from "@/server/modules/chat/redis-cancel-bus";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import { RedisTurnEventLog } from "@/server/modules/chat/turn-event-log";
import type { Liveness } from "@/server/modules/chat/turn-registry";
import { type ChangeFeed, createChangeFeed } from "@/server/modules/live/change-feed";
import { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import { stageSampleRecorder, type StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import {
  meteringBufferDeps,
  usageRecorder,
  type UsageRecorder,
} from "@/server/modules/metering/metering.service";
import {
  createWorkspaceTerminalService,
  type WorkspaceTerminalService,
} from "@/server/modules/terminal/terminal.service";
import { createTerminalRelay } from "@/server/modules/terminal/terminal-relay";
import { createWebhookService, type WebhookService } from "@/server/modules/webhook/webhook.service";
import { lifecycleEvents, type LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { createEgressService, type EgressService } from "@/server/modules/egress/egress.service";
import {
  createWorkspaceContentService,
  type WorkspaceContentService,
} from "@/server/modules/workspace-content/workspace-content.service";
import { createWorkspaceService, type WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { createPreviewService, type PreviewService } from "@/server/modules/preview/preview.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { processLiveness, startHeartbeat } from "@/server/queue/heartbeat";
import { createProcessQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";

type WorkspaceServices = {
  service: WorkspaceService;
  content: WorkspaceContentService;
  terminals: WorkspaceTerminalService;
  previews: PreviewService;
};

/** The web app's server side (the tRPC context's runtime is these and the root: server/api/composition.ts). */
type BerthApi = {
  logger: Logger;
  auth: BerthAuth;
  /** Origins whose cookie-authenticated POSTs are accepted (CSRF check, server/api/request-origin.ts). */
  origins: { allowedOrigins: readonly string[] };
  /** The sign-in throttle (Redis-backed, so every replica counts the same failures). */
  signInGuard: SignInGuard;
};

/** This process as a holder of chat turns and workspace leases (see `holder` in createBerth). */
type Holder = { liveness: Liveness; ttlMs: number; heartbeat: { stop(): Promise<void> } };

/** One process' Berth: everything built once, by `createBerth`. */
export type Berth = {
  readonly config: BerthConfig;
  readonly engineConfig: EngineConfig;
  /** The root logger (level from LOG_LEVEL); components take children. */
  readonly log: Logger;
  /** The process' database client (one pool). Services and data functions receive it from here. */
  readonly db: Db;
  /** The shared producer connection (enqueue buffers, counters, pub/sub publishes). */
  readonly redis: Redis;
  /** Every queue of Berth's catalog, on a connection of their own. */
  readonly queues: QueueSet<BerthJobCatalog>;
  /** Quota admission and limits: the installation's quota configuration over the shared Redis counters. */
  readonly quota: QuotaDeps;
  /** The tenant change feed; every process with an engine announces on it (server/modules/live). */
  readonly changeFeed: ChangeFeed;
  /** Buffers audit entries (`audit.flush`), over `redis` and `queues`: what services audit through. */
  readonly audit: AuditRecorder;
  /** Announces lifecycle events to tenants' webhooks (`webhook.dispatch` on `queues`; warns on `log`). */
  readonly lifecycle: LifecycleEvents;
  /** Buffers usage for the ledger (`metering.flush`), over `redis` and `queues`. */
  readonly usage: UsageRecorder;
  /** Buffers stage timings (`metrics.flush`), over `redis`; never rejects. */
  readonly stageSamples: StageSampleRecorder;
  /** The API half of a provision's stage timings (server/modules/metrics/attach-tracker.ts). */
  readonly attachTracker: AttachTracker;
  /** The workspace engine: one WorkspaceManager, one set of MCP children. */
  readonly engine: WorkspaceEngine;
  /** The workspace service and its content and terminal halves, over `engine`. */
  readonly workspaces: WorkspaceServices;
  /** Agents, sessions, chat (one turn registry), jobs and checkpoints, over `workspaces`. */
  readonly agents: AgentServices;
  /** Tenants' own backend settings. */
  readonly backendSettings: BackendSettingsService;
  /** The tenant side of lifecycle webhooks. */
  readonly webhooks: WebhookService;
  /** Egress policies and secrets; each turn's grant on its machine (server/modules/egress/). */
  readonly egress: EgressService;
  /** The web app's server side: the tRPC runtime, better-auth and the sign-in guard. */
  readonly api: BerthApi;
  /** The change feed if something built it (announcing never builds one: a script announces nothing). */
  builtChangeFeed(): ChangeFeed | undefined;
  /** The attach tracker if something built it. */
  builtAttachTracker(): AttachTracker | undefined;
  /**
   * Graceful shutdown of what this root built, in reverse order: agent services (and the holder heartbeat),
   * terminals, lease-release retries, engine, change feed, then queues, Redis and the database client.
   * `stepMs` bounds each step (a close can hang while Redis or the database is down).
   */
  close(options?: { stepMs?: number }): Promise<void>;
};

export type CreateBerthOptions = {
  /** The engine's part of the environment; default: parsed from process.env. */
  engineConfig?: EngineConfig;
  /** Use this engine instead of building one (tests' harnesses); the root does not close it. */
  engine?: WorkspaceEngine;
  /** Use these queues instead of building them (tests' harnesses); the root does not close them. */
  queues?: QueueSet<BerthJobCatalog>;
};

/** A member built on first use, once; `built()` answers without building. */
function lazy<T>(build: () => T): { (): T; built(): T | undefined } {
  let value: { current: T } | undefined;
  const get = () => (value ??= { current: build() }).current;
  get.built = () => value?.current;
  return get;
}

async function within(closing: Promise<unknown> | undefined, stepMs: number | undefined): Promise<void> {
  if (!closing) return;
  const settled = closing.then(
    () => undefined,
    () => undefined,
  );
  if (stepMs === undefined) return settled;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, stepMs)))]);
  clearTimeout(timer);
}

async function quit(redis: Redis): Promise<void> {
  await redis.quit().catch(() => redis.disconnect());
}

/** Builds one process' Berth from its configuration (see the module comment). */
export function createBerth(config: BerthConfig, options: CreateBerthOptions = {}): Berth {
  const engineConfig = lazy(() => options.engineConfig ?? loadEngineConfig());
  const log = lazy(() => createLogger(config.logging));
  const db = lazy(() => createDatabaseClient(config.database));
  const redis = lazy(() => createRedisConnection(config.redis, "producer"));
  const queues = lazy(
    () =>
      options.queues ??
      createProcessQueues({ redis: config.redis, log: log().child({ component: "queues" }) }),
  );
  const secretKey = () => secretKeyFromBytes(config.secrets.encryptionKey);
  const quota = lazy((): QuotaDeps => ({
    redis: redis(),
    redisPrefix: queues().redisPrefix,
    config: config.quotas,
  }));

  // What the hot paths buffer off their path (Redis lists the workers flush), over this root's Redis/queues.
  const audit = lazy(() => auditRecorder(() => auditBufferDeps(redis(), queues())));
  const lifecycle = lazy(() => lifecycleEvents({ queues, log }));
  const usage = lazy(() => usageRecorder(() => meteringBufferDeps(redis(), queues())));
  const stageSamples = lazy(() =>
    stageSampleRecorder(() => ({ redis: redis(), redisPrefix: queues().redisPrefix })),
  );

  const changeFeed = lazy(() =>
    createChangeFeed({
      redis: redis(),
      subscriber: () => createRedisConnection(config.redis, "worker", "berth-change-feed"),
      prefix: config.redis.prefix,
      log: log().child({ component: "change-feed" }),
    }),
  );
  const attachTracker = lazy(
    () =>
      new AttachTracker((samples) => {
        void stageSamples().record(samples, (error) =>
          log().warn({ err: error }, "could not buffer stage timings"),
        );
      }),
  );

  const engine = lazy(() => {
    if (options.engine) return options.engine;
    attachTracker();
    return composeEngine({
      config: engineConfig(),
      queues: queues(),
      secret: config.secrets.authSecret,
      log: log(),
      encryptionKey: config.secrets.encryptionKey,
      db: db(),
      quota,
      attachTracker,
      usage,
      stageSamples,
      lifecycle: lifecycle(),
    });
  });
  // Every process that has an engine changes workspaces, so it also announces them (API and workers).
  const liveEngine = () => (changeFeed(), engine());

  /**
   * This process as a holder of chat turns and workspace leases: an id that beats in the `holders`
   * heartbeat set (WORKERS_HEARTBEAT_TTL_MS, three beats per TTL) from its first use on, and the others'
   * liveness read from the same set. A crashed process stops beating; the others release what it held.
   */
  const holder = lazy((): Holder => {
    const ttlMs = config.workers.heartbeatTtlMs;
    const id = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    const onError = (error: unknown) => log().warn({ err: error }, "holder heartbeat failed");
    const heartbeat = startHeartbeat({
      redis: redis(),
      redisPrefix: config.redis.prefix,
      workerId: id,
      intervalMs: Math.max(300, Math.floor(ttlMs / 3)),
      onError,
      group: "holders",
    });
    heartbeat.ready.catch(onError);
    const liveness: Liveness = {
      ownerId: id,
      classify: (ids) => processLiveness(redis(), config.redis.prefix, "holders", ids, ttlMs),
    };
    return { liveness, ttlMs, heartbeat };
  });

  const workspaces = lazy((): WorkspaceServices => {
    const holderId = holder().liveness.ownerId;
    const service = createWorkspaceService(liveEngine(), {
      db: db(),
      attachTracker,
      quota,
      audit: audit(),
      lifecycle: lifecycle(),
      leaseOwnerId: holderId,
    });
    // Reattaches across replicas: this process owns its terminals under its holder id.
    const relay = createTerminalRelay({
      redis: redis(),
      // Bounded retries: a terminal opened while Redis is away works locally instead of waiting.
      subscriber: () => createRedisConnection(config.redis, "producer", "berth-terminal-relay"),
      prefix: config.redis.prefix,
      processId: holderId,
    });
    return {
      service,
      content: createWorkspaceContentService(service, { db: db(), quota }),
      terminals: createWorkspaceTerminalService(
        service,
        { db: db(), audit: audit() },
        { reattachGraceMs: config.http.terminalReattachGraceMs },
        relay,
      ),
      previews: createPreviewService({
        db: db(),
        workspaces: service,
        authSecret: config.secrets.authSecret,
        previewUrl: config.http.preview?.url ?? null,
      }),
    };
  });

  const agents = lazy(() => {
    const subscriber = createRedisConnection(config.redis, "worker", "berth-turn-cancel");
    const { liveness, ttlMs } = holder();
    const services = createAgentServices({
      db: db(),
      workspaces: workspaces().service,
      secretKey: secretKey(),
      cancelBus: new RedisCancelBus({ redis: redis(), subscriber, prefix: config.redis.prefix }),
      eventLog: new RedisTurnEventLog({
        redis: redis(),
        prefix: config.redis.prefix,
        onWriteError: (error) =>
          log().warn({ err: error }, "could not store a turn's events for re-attaching"),
      }),
      liveness,
      reapIntervalMs: Math.max(300, Math.floor(ttlMs / 3)),
      egress: egress(),
      quota,
      attachTracker,
      audit: audit(),
      lifecycle: lifecycle(),
      usage,
      stageSamples,
    });
    return { services, subscriber };
  });

  const api = lazy((): BerthApi => {
    const logger = log().child({ component: "api" });
    const authLog = logger.child({ component: "better-auth" });
    const trustedOrigins = loopbackAliases(config.http.baseUrl);
    const auth = createAuth({
      secret: config.secrets.authSecret,
      baseUrl: config.http.baseUrl,
      trustedOrigins,
      prisma: db(),
      // Wrong passwords and rejected keys are client mistakes that better-auth logs as errors.
      log: (level, message, ...args) => authLog[level === "error" ? "warn" : level]({ args }, message),
    });
    const origins = { allowedOrigins: [new URL(config.http.baseUrl).origin, ...trustedOrigins] };
    const signInGuard = createSignInGuard({
      db: db(),
      redis: redis(),
      redisPrefix: config.redis.prefix,
      recordAudit: (scope, entry) => audit().record(scope, entry),
      log: logger.child({ component: "sign-in-guard" }),
    });
    return { logger, auth, origins, signInGuard };
  });

  const backendSettings = lazy(() =>
    createBackendSettingsService({
      db: db(),
      secretKey: secretKey(),
      enabledKinds: () => liveEngine().drivers.all.map((driver) => driver.kind),
      audit: audit(),
    }),
  );
  const egress = lazy(() =>
    createEgressService({
      db: db(),
      secretKey: secretKey(),
      log: log().child({ component: "egress" }),
      audit: audit(),
    }),
  );
  const webhooks = lazy(() =>
    createWebhookService({
      db: db(),
      secretKey: secretKey(),
      policy: { allowedOrigins: config.operations.webhookAllowedOrigins },
      queues,
      audit: audit(),
    }),
  );

  const berth: Berth = {
    config,
    get engineConfig() {
      return engineConfig();
    },
    get log() {
      return log();
    },
    get db() {
      return db();
    },
    get redis() {
      return redis();
    },
    get queues() {
      return queues();
    },
    get quota() {
      return quota();
    },
    get changeFeed() {
      return changeFeed();
    },
    get audit() {
      return audit();
    },
    get lifecycle() {
      return lifecycle();
    },
    get usage() {
      return usage();
    },
    get stageSamples() {
      return stageSamples();
    },
    get attachTracker() {
      return attachTracker();
    },
    get engine() {
      return liveEngine();
    },
    get workspaces() {
      return workspaces();
    },
    get agents() {
      return agents().services;
    },
    get backendSettings() {
      return backendSettings();
    },
    get webhooks() {
      return webhooks();
    },
    get egress() {
      return egress();
    },
    get api() {
      return api();
    },
    builtChangeFeed: () => changeFeed.built(),
    builtAttachTracker: () => attachTracker.built(),
    async close({ stepMs } = {}) {
      const builtAgents = agents.built();
      builtAgents?.services.close();
      await within(builtAgents && quit(builtAgents.subscriber), stepMs);
      await within(holder.built()?.heartbeat.stop(), stepMs);
      // Open terminals first: each holds a lease and a shell on a machine the engine is about to let go of.
      const services = workspaces.built();
      await within(services?.terminals.closeAll(), stepMs);
      // Then the retries of failed lease releases: what is left goes to the other processes' dead-holder
      // reapers once this process' holder heartbeat is gone.
      await within(services?.service.close(), stepMs);
      if (!options.engine) await within(engine.built()?.close(), stepMs);
      await within(changeFeed.built()?.close(), stepMs);
      const builtRedis = redis.built();
      await Promise.all([
        within(options.queues ? undefined : queues.built()?.close(), stepMs),
        within(builtRedis && quit(builtRedis), stepMs),
        within(db.built()?.$disconnect(), stepMs),
      ]);
    },
  };
  return berth;
}

/**
 * Builds every member an API process serves with, before it serves (`npm start` and the tests that start
 * the app): a database, Redis or driver failure fails the start instead of the first request.
 */
export function buildApiProcess(berth: Berth): void {
  void [berth.db, berth.redis, berth.queues, berth.engine, berth.workspaces, berth.agents, berth.api];
}

/**
 * A local install is opened as localhost or 127.0.0.1 interchangeably; trust both for cookie sign-in
 * (better-auth rejects a POST whose Origin is not trusted). Other base URLs get nothing extra.
 */
export function loopbackAliases(baseUrl: string): string[] {
  const url = new URL(baseUrl);
  const loopbackHosts = ["localhost", "127.0.0.1"];
  if (!loopbackHosts.includes(url.hostname)) return [];
  const port = url.port ? `:${url.port}` : "";
  return loopbackHosts
    .filter((host) => host !== url.hostname)
    .map((host) => `${url.protocol}//${host}${port}`);
}
