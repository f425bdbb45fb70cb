/**
 * The typed client as another project gets it: `npm run build:client`'s tarball (packClientPackage: the
 * package writeClientPackage builds, then `npm pack` of it), installed with `npm install <tarball>` into a
 * project outside the repository and run there against Berth's API over real HTTP with a real API key (its
 * types, checked by a consumer's own tsc, are test/unit/client/client-package.test.ts's). The build (tsc's
 * declaration emit, 45 CPU-seconds) is shared with that test: built-client-package.ts keeps one per content
 * of the sources. Installing it must run nothing of this repository: the package has no scripts, and the
 * repository's node_modules and the inputs of its dashboard build are left as they were (installing the
 * repository itself ran its `postinstall`, prisma generate, which made the next `npm start` rebuild the
 * dashboard).
 */
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { CLIENT_PACKAGE_NAME, packWrittenClientPackage } from "@/scripts/client/pack-client-package";
import { sourceFingerprint } from "@/scripts/services/next-build";
import { copyOfClientPackage } from "../../fixtures/client-package/built-client-package";
import { createTestApiRuntime } from "./support/api-test-runtime";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, "../../..");

// Plain JavaScript: the types are test/unit/client/client-package.test.ts's (a consumer's own tsc over the
// same package), so this install needs no compiler and stays a minute shorter.
const CONSUMER = `
import { createBerthClient, TRPCClientError } from "${CLIENT_PACKAGE_NAME}";

const client = createBerthClient({ url: process.env.BERTH_URL, apiKey: process.env.BERTH_API_KEY });
const overview = await client.tenant.overview.query({});
let refused = "";
try {
  await client.tenant.overview.query({ tenantId: "not-this-tenant" });
} catch (error) {
  if (error instanceof TRPCClientError) refused = String(error.data?.code);
}
console.log(JSON.stringify({
  tenantId: overview.tenant.id,
  createdAtIsDate: overview.tenant.createdAt instanceof Date,
  refused,
}));
`;

/**
 * What an install of the repository changed: its node_modules (npm's record of them), and the fingerprint
 * `npm start` compares with the one its dashboard build recorded (generated/, package.json, the sources):
 * a different one makes it rebuild the dashboard.
 */
async function repoInstallState(): Promise<{ nodeModules: number | null; buildFingerprint: string }> {
  const lock = await fs.stat(path.join(REPO, "node_modules/.package-lock.json")).catch(() => null);
  return { nodeModules: lock?.mtimeMs ?? null, buildFingerprint: await sourceFingerprint(REPO) };
}

describe("berth-client from its tarball, in a project outside the repository", { timeout: 300_000 }, () => {
  let tmp: string;
  let server: ServedHandler;
  let tenant: TenantFixture;
  let before: Awaited<ReturnType<typeof repoInstallState>>;

  beforeAll(async () => {
    before = await repoInstallState();
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), "berth-client-tarball-"));
    const runtime = createTestApiRuntime();
    server = await serveFetchHandler((req) => handleTrpcRequest(req, runtime));
    tenant = await createTenantFixture(runtime, "pkg");
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await closeProcessBerth();
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it("packs with no scripts, installs, type-checks, and makes typed calls against Berth", async () => {
    const out = path.join(tmp, "out");
    const tarball = await packWrittenClientPackage(await copyOfClientPackage(path.join(out, "package")), out);
    expect(path.basename(tarball)).toMatch(/^berth-client-\d+\.\d+\.\d+\.tgz$/);
    const packed = JSON.parse(
      await fs.readFile(path.join(tmp, "out", "package", "package.json"), "utf8"),
    ) as Record<string, unknown>;
    expect(packed).not.toHaveProperty("scripts");
    expect(packed.dependencies).toHaveProperty("@trpc/client");

    const consumer = path.join(tmp, "consumer");
    await fs.mkdir(consumer);
    await fs.writeFile(
      path.join(consumer, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    // Offline when npm's cache holds the versions this repository's own install fetched.
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], {
      cwd: consumer,
      env: { ...process.env, npm_config_loglevel: "error" },
    });
    const installed = JSON.parse(
      await fs.readFile(path.join(consumer, "node_modules", CLIENT_PACKAGE_NAME, "package.json"), "utf8"),
    ) as { name: string };
    expect(installed.name).toBe(CLIENT_PACKAGE_NAME);

    await fs.writeFile(path.join(consumer, "consumer.mjs"), CONSUMER);
    const { stdout } = await run(process.execPath, [path.join(consumer, "consumer.mjs")], {
      cwd: consumer,
      env: { ...process.env, BERTH_URL: server.url, BERTH_API_KEY: tenant.adminKey.plainKey },
    });
    expect(JSON.parse(stdout)).toEqual({
      tenantId: tenant.tenant.id,
      createdAtIsDate: true,
      refused: "FORBIDDEN",
    });

    expect(await repoInstallState()).toEqual(before);
  });
});
