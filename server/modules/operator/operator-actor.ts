import { AppError } from "@/server/shared/errors";
import { isOperatorUser } from "@/server/modules/operator/operator.data";
import type { Db } from "@/server/db";

/**
 * Who acts as an operator, proven: a signed-in user found in `operators` (checked against the database on
 * every call, so a revoked operator stops at once), or the CLI, which runs on the installation with its
 * database credentials and so already holds every power an operator has. Only this file mints one.
 */
declare const operatorBrand: unique symbol;

export type OperatorActor = (
  { readonly kind: "user"; readonly userId: string } | { readonly kind: "cli"; readonly userId: null }
) & { readonly [operatorBrand]: true };

/** The operator behind a signed-in user; FORBIDDEN (`details.reason: "not_operator"`) for anyone else. */
export async function operatorActorForUser(userId: string, db: Db): Promise<OperatorActor> {
  if (!(await isOperatorUser(userId, db))) {
    throw new AppError("FORBIDDEN", `user ${userId} is not an operator`, {
      userMessage: "This needs the operator role (operators run the installation's tenants).",
      details: { reason: "not_operator" },
    });
  }
  return Object.freeze({ kind: "user", userId }) as OperatorActor;
}

/** The CLI's actor (`npm run berth`): see the type's comment for why it needs no further proof. */
export function cliOperatorActor(): OperatorActor {
  return Object.freeze({ kind: "cli", userId: null }) as OperatorActor;
}

/** "operator:<user id>" or "cli": the actor string of receipts and job payloads. */
export function operatorActorLabel(actor: OperatorActor): string {
  return actor.kind === "user" ? `operator:${actor.userId}` : "cli";
}

/** The operator audit's actor columns. */
export function operatorAuditActor(
  actor: OperatorActor,
): { type: "user"; id: string } | { type: "system"; id: string } {
  return actor.kind === "user" ? { type: "user", id: actor.userId } : { type: "system", id: "cli" };
}
