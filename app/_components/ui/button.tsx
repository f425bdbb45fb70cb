"use client";

import type { VariantProps } from "class-variance-authority";
import { Slot } from "radix-ui";
import type { ComponentProps } from "react";
import { buttonVariants } from "./button-variants";
import { cn } from "./cn";
import { useHydrated } from "./use-hydrated";

/**
 * A button; `asChild` renders the styles on its child instead (a Next `<Link>`, for instance). Until React
 * has hydrated the page, a button is disabled (though not dimmed): its handler is not attached yet, and a
 * submit button would otherwise send its form natively, as a GET whose query string holds the fields (a
 * password among them) to the page's own address.
 */
export function Button({
  className,
  variant,
  size,
  asChild = false,
  type,
  disabled,
  ...props
}: ComponentProps<"button"> & VariantProps<typeof buttonVariants> & { asChild?: boolean }) {
  const hydrated = useHydrated();
  if (asChild) {
    return (
      <Slot.Root
        data-slot="button"
        className={cn(buttonVariants({ variant, size, className }))}
        {...props}
        {...(disabled === undefined ? {} : { disabled })}
      />
    );
  }
  return (
    <button
      data-slot="button"
      // A plain button never submits a form by accident; submit buttons say so.
      type={type ?? "button"}
      disabled={disabled === true || !hydrated}
      data-hydrating={hydrated ? undefined : ""}
      className={cn(buttonVariants({ variant, size }), "data-hydrating:opacity-100", className)}
      {...props}
    />
  );
}
