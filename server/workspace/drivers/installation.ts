import { AppError } from "@/server/shared/errors";

/**
 * This installation's stable id (server/modules/installation: one database row, created on first start).
 * Drivers put it on every resource they create on a shared engine (Docker container labels, Kubernetes
 * labels) and list and reap only resources that carry it, so two installations sharing one Docker engine
 * or cluster never delete each other's workspaces (issue 11). Resolved lazily: the composition is sync,
 * the id comes from the database.
 */
export type InstallationIdSource = () => Promise<string>;

/** Label values must be safe for Docker and Kubernetes alike (≤ 63 chars, alphanumerics, `-_.`). */
const INSTALLATION_ID_PATTERN = /^[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?$/;

/**
 * The source a driver uses: memoised, validated, and failing loudly when none was given (never a shared
 * default, which would make installations reap each other's resources again).
 */
export function installationIdOf(source: InstallationIdSource | undefined): InstallationIdSource {
  let resolved: Promise<string> | null = null;
  return () => {
    resolved ??= (async () => {
      if (!source) {
        throw new AppError(
          "INTERNAL",
          "no installation id: build drivers with one (createDriverSet options)",
        );
      }
      const id = await source();
      if (!INSTALLATION_ID_PATTERN.test(id)) throw new AppError("INTERNAL", `invalid installation id: ${id}`);
      return id;
    })();
    // A failed lookup (database down at boot) is tried again on the next call.
    resolved.catch(() => (resolved = null));
    return resolved;
  };
}
