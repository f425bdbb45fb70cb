import path from "node:path";
import { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as download } from "@/app/api/workspaces/[id]/files/download/route";
import { POST as uploadSkill } from "@/app/api/workspaces/[id]/skills/route";
import { createCaller } from "@/server/api/root";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import type { AppError } from "@/server/shared/errors";
import { tarOf, VALID_SKILL_MD, zipOf } from "@/test/unit/workspace/support/archives";
import { contextFromHeaders } from "../api/support/api-test-runtime";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";
import { installTestBerth } from "@/test/setup/test-berth";

const BASE = "http://berth.test";
const params = (id: string) => ({ params: Promise.resolve({ id }) });

describe("workspace route handlers: skill upload (multipart → engine) and signed downloads", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;
  let other: TestTenant;
  let key: string;
  let otherKey: string;
  let workspaceId: string;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    await installTestBerth({ engine: h.engine });
    [tenant, other] = await Promise.all([createTestTenant(), createTestTenant()]);
    const auth = processBerth().api.auth;
    key = (
      await createApiKey(
        auth,
        tenant.scope,
        { name: "routes", role: "admin" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      )
    ).plainKey;
    otherKey = (
      await createApiKey(
        auth,
        other.scope,
        { name: "routes", role: "admin" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      )
    ).plainKey;
    const fresh = await freshSession(tenant.scope);
    workspaceId = fresh.workspaceId;
    const { workspace } = await h.service.resolveForSession(tenant.scope, fresh.session.id);
    await workspace.machine.writeFile(path.posix.join(workspace.workdir, "report.txt"), "hello download");
  });
  afterAll(async () => {
    await closeProcessBerth();
    await h.close();
  });

  function skillForm(manifest: unknown, files: [string, string][]): FormData {
    const form = new FormData();
    form.append("manifest", JSON.stringify(manifest));
    for (const [name, body] of files) form.append("files", new Blob([body]), name);
    return form;
  }

  it("installs an uploaded skill into the agent's partition and lists it", async () => {
    const skillMd = "---\nname: greet\ndescription: greets people\n---\nSay hi.\n";
    const helper = "echo hi\n";
    const form = skillForm(
      {
        entries: [
          { path: "greet/SKILL.md", size: skillMd.length },
          { path: "greet/bin/hi.sh", size: helper.length },
        ],
      },
      [
        ["SKILL.md", skillMd],
        ["hi.sh", helper],
      ],
    );
    const response = await uploadSkill(
      new Request(`${BASE}/api/workspaces/${workspaceId}/skills?agentId=agent-1`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
        body: form,
      }),
      params(workspaceId),
    );
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ name: "greet", deduplicated: false });
    const skills = await h.service.withWorkspace(tenant.scope, workspaceId, "test", (ws) =>
      ws.listSkills("agent-1"),
    );
    expect(skills.skills.map((s) => s.name)).toEqual(["greet"]);
  });

  it("rejects a bad manifest (422), a part larger than declared (422) and another tenant's caller (404)", async () => {
    const call = (form: FormData, bearer = key) =>
      uploadSkill(
        new Request(`${BASE}/api/workspaces/${workspaceId}/skills`, {
          method: "POST",
          headers: { authorization: `Bearer ${bearer}` },
          body: form,
        }),
        params(workspaceId),
      );
    const noSkillMd = await call(
      skillForm({ entries: [{ path: "x/readme.md", size: 2 }] }, [["readme.md", "hi"]]),
    );
    expect(noSkillMd.status).toBe(422);
    const traversal = await call(
      skillForm({ entries: [{ path: "../SKILL.md", size: 2 }] }, [["SKILL.md", "hi"]]),
    );
    expect(traversal.status).toBe(422);
    const lying = await call(
      skillForm({ entries: [{ path: "x/SKILL.md", size: 2 }] }, [["SKILL.md", "much longer"]]),
    );
    expect(lying.status).toBe(422);
    const foreign = await call(
      skillForm({ entries: [{ path: "x/SKILL.md", size: 2 }] }, [["SKILL.md", "hi"]]),
      otherKey,
    );
    expect(foreign.status).toBe(404);
  });

  it("folder upload: a skill folder nested in the chosen folder installs as the first folder holding SKILL.md", async () => {
    const skillMd = VALID_SKILL_MD("nested-folder");
    const form = skillForm(
      {
        entries: [
          { path: "outer/README.md", size: 7 },
          { path: "outer/inner/SKILL.md", size: skillMd.length },
        ],
      },
      [
        ["README.md", "wrapper"],
        ["SKILL.md", skillMd],
      ],
    );
    const response = await uploadSkill(
      new Request(`${BASE}/api/workspaces/${workspaceId}/skills?agentId=nested`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
        body: form,
      }),
      params(workspaceId),
    );
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ name: "nested-folder", dir: "inner" });
    const files = await h.content().listFiles(tenant.scope, workspaceId, "skills/nested/inner");
    expect(files.entries.map((entry) => entry.name)).toEqual(["SKILL.md"]);
  });

  describe("archive bodies (zip, tar, tar.gz), streamed into the engine", () => {
    const post = (body: BodyInit | ReadableStream<Uint8Array>, contentType: string, query = "") =>
      uploadSkill(
        new Request(`${BASE}/api/workspaces/${workspaceId}/skills?agentId=archives${query}`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": contentType },
          body,
          ...({ duplex: "half" } as object),
        }),
        params(workspaceId),
      );
    const installedDirs = async () =>
      (await h.content().listSkills(tenant.scope, workspaceId, "archives")).map((skill) => skill.dir).sort();

    it("installs a zip, a tar.gz and an octet-stream tar (format=tar); a nested folder installs as itself", async () => {
      const zip = await zipOf([
        { name: "zipped/SKILL.md", content: VALID_SKILL_MD("zipped") },
        { name: "zipped/run.sh", content: "echo zipped\n", mode: 0o100755 },
      ]);
      const zipResponse = await post(new Uint8Array(zip), "application/zip");
      expect(zipResponse.status).toBe(201);
      expect(await zipResponse.json()).toMatchObject({ name: "zipped", dir: "zipped", deduplicated: false });

      const tarGz = await tarOf(
        [
          { name: "wrapper/notes.md", content: "not part of the skill" },
          { name: "wrapper/gzipped/SKILL.md", content: VALID_SKILL_MD("gzipped") },
        ],
        true,
      );
      const gzResponse = await post(new Uint8Array(tarGz), "application/gzip");
      expect(gzResponse.status).toBe(201);
      expect(await gzResponse.json()).toMatchObject({ name: "gzipped", dir: "gzipped" });

      const tar = await tarOf([{ name: "plain/SKILL.md", content: VALID_SKILL_MD("plain") }]);
      const tarResponse = await post(new Uint8Array(tar), "application/octet-stream", "&format=tar");
      expect(tarResponse.status).toBe(201);
      expect(await installedDirs()).toEqual(["gzipped", "plain", "zipped"]);
    });

    it("refuses unknown or contradicting body formats (422) and hostile or rootless archives (400)", async () => {
      const tar = await tarOf([{ name: "x/SKILL.md", content: VALID_SKILL_MD("x") }]);
      expect((await post(new Uint8Array(tar), "text/plain")).status).toBe(422);
      expect((await post(new Uint8Array(tar), "application/octet-stream")).status).toBe(422);
      expect((await post(new Uint8Array(tar), "application/octet-stream", "&format=rar")).status).toBe(422);
      expect((await post(new Uint8Array(tar), "application/zip", "&format=tar")).status).toBe(422);

      const traversal = await tarOf([
        { name: "evil/SKILL.md", content: VALID_SKILL_MD("evil") },
        { name: "../escaped.txt", content: "pwned" },
      ]);
      const hostile = await post(new Uint8Array(traversal), "application/x-tar");
      expect(hostile.status).toBe(400);
      const linked = await tarOf([
        { name: "linked/SKILL.md", content: VALID_SKILL_MD("linked") },
        { name: "linked/passwd", type: "symlink", linkname: "/etc/passwd" },
      ]);
      expect((await post(new Uint8Array(linked), "application/x-tar")).status).toBe(400);
      const tooDeep = await tarOf([{ name: "a/b/c/d/SKILL.md", content: VALID_SKILL_MD("deep") }]);
      expect((await post(new Uint8Array(tooDeep), "application/x-tar")).status).toBe(400);
      expect((await post(new Uint8Array(Buffer.from("not a zip")), "application/zip")).status).toBe(400);
      expect(await installedDirs()).not.toEqual(expect.arrayContaining(["evil", "linked", "deep"]));
      const root = await h.content().listFiles(tenant.scope, workspaceId, ".");
      expect(root.entries.map((entry) => entry.name)).not.toContain("escaped.txt");
    });

    it("refuses a front-matter name or description Postgres cannot store or over the bound with a 400 naming it", async () => {
      const skillMd = (name: string, description = "Does things") =>
        `---\nname: ${name}\ndescription: ${description}\n---\n# bad\n`;
      const cases: [string, string, RegExp][] = [
        ["nul-name", skillMd('"bad\\0name"'), /^name: .*NUL/],
        ["surrogate-name", skillMd('"bad\\ud800name"'), /^name: .*surrogate/],
        ["long-name", skillMd("n".repeat(5_000)), /^name: must be at most 100 characters/],
        ["nul-description", skillMd("ok", '"says\\0things"'), /^description: .*NUL/],
        [
          "long-description",
          skillMd("ok", "d".repeat(1_025)),
          /^description: must be at most 1024 characters/,
        ],
      ];
      for (const [folder, content, message] of cases) {
        const tar = await tarOf([{ name: `${folder}/SKILL.md`, content }]);
        const response = await post(new Uint8Array(tar), "application/x-tar");
        expect(response.status, folder).toBe(400);
        const body = (await response.json()) as { error: { code: string; message: string } };
        expect(body.error.message, folder).toMatch(message);
      }
      // The folder upload takes the same install path.
      const folderResponse = await uploadSkill(
        new Request(`${BASE}/api/workspaces/${workspaceId}/skills?agentId=archives`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}` },
          body: skillForm(
            { entries: [{ path: "nul-folder/SKILL.md", size: Buffer.byteLength(cases[0]![1]) }] },
            [["SKILL.md", cases[0]![1]]],
          ),
        }),
        params(workspaceId),
      );
      expect(folderResponse.status).toBe(400);
      expect(await installedDirs()).not.toEqual(
        expect.arrayContaining([...cases.map(([folder]) => folder), "nul-folder"]),
      );
      // The longest allowed ones install.
      const longest = await tarOf([
        { name: "longest/SKILL.md", content: skillMd("n".repeat(100), "d".repeat(1_024)) },
      ]);
      expect((await post(new Uint8Array(longest), "application/x-tar")).status).toBe(201);
    });

    it("answers a hostile entry while the body is still streaming: the archive is never buffered whole", async () => {
      const head = await tarOf([{ name: "../first-entry-escapes", content: "x" }]);
      // One valid entry's blocks (header + data), repeated for ever after the hostile first entry.
      const filler = (await tarOf([{ name: "pad/filler.txt", content: "y" }])).subarray(0, 1024);
      let pulled = 0;
      const endless = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new Uint8Array(head.subarray(0, 1024)));
        },
        pull(controller) {
          pulled += filler.length;
          controller.enqueue(new Uint8Array(filler));
        },
      });
      const response = await post(endless, "application/x-tar");
      expect(response.status).toBe(400);
      expect(pulled).toBeLessThan(64 * 1024 * 1024);
      await endless.cancel().catch(() => undefined);
    });

    it("two skills that declare one name: listed as name and name (1); remove by name is a 409 naming both, by dir works", async () => {
      for (const [folder, description] of [
        ["twin-a", "first twin"],
        ["twin-b", "second twin"],
      ] as const) {
        const tar = await tarOf([
          { name: `${folder}/SKILL.md`, content: VALID_SKILL_MD("twin", description) },
        ]);
        const response = await post(new Uint8Array(tar), "application/x-tar");
        expect(response.status).toBe(201);
      }
      const caller = createCaller(
        contextFromHeaders(processApiRuntime(), { authorization: `Bearer ${key}` }),
      );
      const target = { tenantId: tenant.tenantId, workspaceId, agentId: "archives" };
      const listed = (await caller.workspace.skill.list(target)).filter(
        (skill) => skill.declaredName === "twin",
      );
      expect(listed.map(({ name, dir }) => ({ name, dir }))).toEqual([
        { name: "twin", dir: "twin-a" },
        { name: "twin (1)", dir: "twin-b" },
      ]);
      const conflict = await caller.workspace.skill
        .remove({ ...target, name: "twin" })
        .catch((error: unknown) => error as TRPCError);
      expect(conflict).toBeInstanceOf(TRPCError);
      expect((conflict as TRPCError).code).toBe("CONFLICT");
      expect((conflict as TRPCError).message).toContain("twin-a");
      expect(((conflict as TRPCError).cause as AppError).details).toMatchObject({
        candidates: [
          { dir: "twin-a", name: "twin" },
          { dir: "twin-b", name: "twin (1)" },
        ],
      });
      await caller.workspace.skill.remove({ ...target, dir: "twin-b" });
      const after = (await caller.workspace.skill.list(target)).filter(
        (skill) => skill.declaredName === "twin",
      );
      expect(after.map((skill) => skill.dir)).toEqual(["twin-a"]);
    });
  });

  it("streams a file for a valid token and refuses a token for another path, workspace or a forged one", async () => {
    const { token, url } = await h.content().downloadToken(tenant.scope, workspaceId, "report.txt");
    const ok = await download(new Request(`${BASE}${url}&download=true`), params(workspaceId));
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-disposition")).toBe("attachment; filename*=UTF-8''report.txt");
    expect(await ok.text()).toBe("hello download");

    const q = (p: string, t: string) =>
      `${BASE}/api/workspaces/${workspaceId}/files/download?path=${p}&token=${t}`;
    expect((await download(new Request(q("other.txt", token)), params(workspaceId))).status).toBe(401);
    expect((await download(new Request(q("report.txt", token)), params("another-ws"))).status).toBe(401);
    const forged = `${token.slice(0, -4)}AAAA`;
    expect((await download(new Request(q("report.txt", forged)), params(workspaceId))).status).toBe(401);
  });
});
