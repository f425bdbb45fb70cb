"use client";

import { Toaster as Sonner } from "sonner";
import { useTheme } from "./theme";

/** Toasts for the outcome of an action (sonner), following the dashboard's theme. */
export function Toaster() {
  const { theme } = useTheme();
  return <Sonner theme={theme} position="bottom-right" richColors closeButton />;
}
