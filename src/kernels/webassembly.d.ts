/**
 * The slice of the WebAssembly JS API the kernels use. TypeScript ships these types only in the
 * DOM and WebWorker libs, which would drag browser globals into a Node project.
 */
declare namespace WebAssembly {
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  class Module {
    constructor(bytes: BufferSource);
  }
  type ImportValue = ((...args: never[]) => unknown) | Memory | number;
  type Imports = Record<string, Record<string, ImportValue>>;
  type Exports = Record<string, unknown>;
  class Instance {
    constructor(module: Module, imports?: Imports);
    readonly exports: Exports;
  }
  function validate(bytes: BufferSource): boolean;
}
