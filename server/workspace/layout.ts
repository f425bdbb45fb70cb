/** The workspace's on-disk layout (agentscope-spec.md §1.2), relative to the workdir. */
export const WORKSPACE_LAYOUT = {
  mcpFile: ".mcp",
  dataDir: "data",
  skillsDir: "skills",
  skillSeedDir: "skills/.seed",
  sessionsDir: "sessions",
} as const;

/** Folders every initialised workspace has (the reference's Local made data/ and sessions/ lazily). */
export const LAYOUT_DIRECTORIES = [
  WORKSPACE_LAYOUT.dataDir,
  WORKSPACE_LAYOUT.skillsDir,
  WORKSPACE_LAYOUT.skillSeedDir,
  WORKSPACE_LAYOUT.sessionsDir,
] as const;
