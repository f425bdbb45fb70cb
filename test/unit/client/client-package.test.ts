/**
 * The typed client used from another project: `writeClientPackage` (what npm run build:client packs; built
 * once per content of the sources for this file and the integration one: built-client-package.ts) is
 * linked into a consumer project in a temp dir (as `node_modules/berth-client`, its own package.json) whose
 * tsconfig has NO paths mapping and `nodenext` resolution; `tsc -p` must accept typed calls and reject
 * wrong ones (`@ts-expect-error` lines, and an any-check, so declarations that degrade to `any` fail), and
 * Node must load the bundle. The same consumer importing the TypeScript sources directly fails on `@/`:
 * the control that shows the check can fail. (test/integration/api/berth-client-package.test.ts installs the
 * packed tarball itself and calls a running Berth.)
 */
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_PACKAGE_NAME } from "@/scripts/client/pack-client-package";
import { copyOfClientPackage } from "../../fixtures/client-package/built-client-package";

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, "../../..");
const TSC = path.join(REPO, "node_modules/typescript/bin/tsc");

const CONSUMER = `
import { createBerthClient, TRPCClientError, type ChatRunResult } from "berth-client";

type IsAny<T> = 0 extends 1 & T ? true : false;
const client = createBerthClient({ url: "http://localhost:3000", apiKey: "berth_example" });

export async function main(): Promise<ChatRunResult> {
  const agents = await client.agent.list.query({ limit: 10 });
  const notAny: IsAny<typeof agents> = false;
  const first = agents.items[0]!;
  const name: string = first.name;
  // @ts-expect-error a procedure the API does not have
  await client.agent.noSuchProcedure.query();
  // @ts-expect-error a name is a string, not a number
  const wrong: number = name;
  // @ts-expect-error session.create needs an agentId
  await client.session.create.mutate({});
  const { sessionId } = await client.session.create.mutate({ agentId: first.id });
  try {
    const result = await client.chat.run({ sessionId, message: "hi" }, { onEvent: (event) => void event.type });
    const text: string = result.text;
    const tokens: number = result.usage.totalTokens;
    void [text, tokens, notAny, wrong];
    return result;
  } catch (error) {
    if (error instanceof TRPCClientError) console.error(error.message);
    throw error;
  }
}
`;

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    module: "nodenext",
    moduleResolution: "nodenext",
    target: "es2023",
    lib: ["es2023", "dom"],
    types: ["node"],
    noEmit: true,
    skipLibCheck: true,
  },
  files: ["consumer.ts"],
};

async function tsc(project: string): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout } = await run(process.execPath, [TSC, "-p", project], { cwd: project });
    return { ok: true, output: stdout };
  } catch (error) {
    return { ok: false, output: (error as { stdout?: string }).stdout ?? String(error) };
  }
}

describe("the typed client from another project", () => {
  let tmp: string;
  let consumer: string;

  beforeAll(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), "berth-client-pkg-"));
    const pkg = path.join(tmp, CLIENT_PACKAGE_NAME);
    await copyOfClientPackage(pkg);
    // The package's dependencies (@trpc/client, superjson, zod, ...), as an install would provide them.
    await fs.symlink(path.join(REPO, "node_modules"), path.join(pkg, "node_modules"));
    consumer = path.join(tmp, "consumer");
    await fs.mkdir(path.join(consumer, "node_modules"), { recursive: true });
    await fs.symlink(pkg, path.join(consumer, "node_modules", CLIENT_PACKAGE_NAME));
    await fs.symlink(path.join(REPO, "node_modules/@types"), path.join(consumer, "node_modules/@types"));
    await fs.writeFile(
      path.join(consumer, "package.json"),
      JSON.stringify({ name: "consumer", type: "module" }),
    );
    await fs.writeFile(path.join(consumer, "tsconfig.json"), JSON.stringify(TSCONFIG));
    await fs.writeFile(path.join(consumer, "consumer.ts"), CONSUMER);
  }, 240_000);

  afterAll(async () => {
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  it("type-checks against berth-client with no paths mapping, and rejects wrong calls", async () => {
    const result = await tsc(consumer);
    expect(result.output).toBe("");
    expect(result.ok).toBe(true);
  }, 120_000);

  it("loads the bundle in Node: createBerthClient with chat.run", async () => {
    const script = path.join(consumer, "run.mjs");
    await fs.writeFile(
      script,
      `import { createBerthClient, resolveTrpcEndpoint } from "berth-client";
const client = createBerthClient({ url: "http://127.0.0.1:9", apiKey: "k" });
console.log(typeof client.chat.run, typeof client.agent.list.query, resolveTrpcEndpoint("http://x/"));`,
    );
    const { stdout } = await run(process.execPath, [script], { cwd: consumer });
    expect(stdout.trim()).toBe("function function http://x/api/trpc");
  }, 60_000);

  it("control: the same consumer importing the sources directly fails on the @/ alias", async () => {
    const control = path.join(tmp, "control");
    await fs.mkdir(control);
    const source = path
      .relative(control, path.join(REPO, "server/client/index.ts"))
      .split(path.sep)
      .join("/");
    await fs.writeFile(
      path.join(control, "package.json"),
      JSON.stringify({ name: "control", type: "module" }),
    );
    await fs.writeFile(
      path.join(control, "tsconfig.json"),
      JSON.stringify({
        ...TSCONFIG,
        compilerOptions: {
          ...TSCONFIG.compilerOptions,
          allowImportingTsExtensions: true,
          typeRoots: [path.join(REPO, "node_modules/@types")],
        },
      }),
    );
    await fs.writeFile(path.join(control, "consumer.ts"), CONSUMER.replace('"berth-client"', `"${source}"`));
    const result = await tsc(control);
    expect(result.ok).toBe(false);
    expect(result.output).toMatch(/Cannot find module '@\//);
  }, 120_000);
});
