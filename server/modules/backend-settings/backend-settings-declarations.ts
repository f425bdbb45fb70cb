import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import type { TenantSettingsDeclaration } from "@/server/workspace/drivers/driver";
import { DRIVERS, type DriverRegistry } from "@/server/workspace/drivers/registry";
import type { BackendSettingsField } from "./backend-settings.types";

/**
 * What a backend's driver declares of its tenant settings (`DriverDefinition.tenantSettings`), read for the
 * backend-settings service: no backend is named here, so a new driver's settings need no change in this module.
 */
export type SettingsOfBackend = {
  backend: string;
  label: string;
  declaration: TenantSettingsDeclaration;
  /** The stored non-secret fields (a JSON column, validated again whenever it is read). */
  stored: z.ZodObject;
  /** A patch: each field optional (keep) or null (the installation's); unknown fields dropped. */
  patch: z.ZodObject;
};

/** The declaration of `backend`'s settings in `registry`, or null when no driver of that kind declares any. */
export function settingsOf(backend: string, registry: DriverRegistry = DRIVERS): SettingsOfBackend | null {
  const definition = Object.values(registry).find(
    (candidate) => candidate.kind === backend && candidate.tenantSettings,
  );
  const declaration = definition?.tenantSettings;
  if (!definition || !declaration) return null;
  const secret = declaration.secretField;
  const shape = declaration.schema.shape as Record<string, z.ZodType>;
  return {
    backend,
    label: definition.label,
    declaration,
    stored: secret ? declaration.schema.omit({ [secret]: true } as never) : declaration.schema,
    patch: z.object(
      Object.fromEntries(Object.entries(shape).map(([name, field]) => [name, nullablePatchField(field)])),
    ),
  };
}

/** A field of a patch: its value, null (the installation's) or absent (kept). */
function nullablePatchField(field: z.ZodType): z.ZodType {
  const inner: z.ZodType = field instanceof z.ZodOptional ? (field.unwrap() as z.ZodType) : field;
  return inner.nullable().optional();
}

/** `settingsOf`, or NOT_FOUND naming the backend. */
export function requireSettingsOf(backend: string, registry?: DriverRegistry): SettingsOfBackend {
  const settings = settingsOf(backend, registry);
  if (settings) return settings;
  throw new AppError("NOT_FOUND", `the ${backend} backend takes no tenant settings`, {
    userMessage: `The ${backend} backend has no settings of its own for a tenant.`,
    details: { backend },
  });
}

type JsonSchemaProperty = { title?: string; type?: string; minimum?: number; maximum?: number };

/** The card's fields, in the schema's order, from its JSON Schema (titles from each field's `.meta`). */
export function fieldsOf(settings: SettingsOfBackend): BackendSettingsField[] {
  const json = z.toJSONSchema(settings.declaration.schema, { io: "input", unrepresentable: "any" }) as {
    properties?: Record<string, JsonSchemaProperty>;
  };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    title: property.title ?? name,
    type: property.type === "integer" || property.type === "number" ? property.type : "string",
    secret: name === settings.declaration.secretField,
    minimum: property.minimum ?? null,
    maximum: property.maximum ?? null,
  }));
}
