/**
 * A minimal PNG codec: 8-bit RGB encoding (filter 0, zlib deflate, CRC32) for generated
 * images, and decoding of non-interlaced 8-bit gray/RGB/RGBA/gray-alpha for the judge.
 */
import { deflateSync, inflateSync } from "node:zlib";
import { HadisError } from "../../contracts/errors.ts";

/** The eight-byte PNG file signature. */
export const PNG_SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);

/** An image as interleaved 8-bit RGB rows. */
export interface RgbImage {
  width: number;
  height: number;
  /** `width * height * 3` bytes, row-major. */
  pixels: Uint8Array;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (ISO-HDLC) over `bytes`, as the PNG chunk trailer. */
export function crc32(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out, 4, 8 + data.length));
  return out;
}

/** Encodes 8-bit RGB pixels as a PNG file (deterministic bytes for equal pixels). */
export function encodePng(image: RgbImage): Uint8Array {
  const { width, height, pixels } = image;
  if (pixels.length !== width * height * 3) throw new Error("png: pixel buffer size does not match width*height*3");
  const header = new Uint8Array(13);
  const view = new DataView(header.buffer);
  view.setUint32(0, width);
  view.setUint32(4, height);
  header.set([8, 2, 0, 0, 0], 8);
  const stride = width * 3;
  const raw = new Uint8Array((stride + 1) * height);
  for (let y = 0; y < height; y++) raw.set(pixels.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  const parts = [PNG_SIGNATURE, chunk("IHDR", header), chunk("IDAT", deflateSync(raw)), chunk("IEND", new Uint8Array(0))];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** Pixels a decoded image may have (4096²): a small file can declare, and inflate to, gigabytes. */
export const MAX_PNG_PIXELS = 4096 * 4096;

/** A PNG the decoder refuses: the caller's input, a typed `invalid_request` on field `image`. */
function badPng(message: string): HadisError {
  return new HadisError("invalid_request", `png: ${message}`, { field: "image" });
}

/**
 * Decodes a non-interlaced 8-bit PNG (gray, RGB, gray+alpha, RGBA) to RGB; alpha is dropped.
 * Anything else, or an image over `MAX_PNG_PIXELS`, is refused with `invalid_request`.
 */
export function decodePng(file: Uint8Array): RgbImage {
  try {
    return decodePngChecked(file);
  } catch (err) {
    if (err instanceof HadisError) throw err;
    throw badPng((err as Error).message); // e.g. zlib on corrupt or over-long data
  }
}

function decodePngChecked(file: Uint8Array): RgbImage {
  for (let i = 0; i < 8; i++) if (file[i] !== PNG_SIGNATURE[i]) throw badPng("bad signature");
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  let offset = 8;
  let width = 0;
  let height = 0;
  let colorType = -1;
  const idat: Uint8Array[] = [];
  while (offset + 8 <= file.length) {
    const length = view.getUint32(offset);
    const type = String.fromCharCode(...file.subarray(offset + 4, offset + 8));
    const data = file.subarray(offset + 8, offset + 8 + length);
    if (type === "IHDR") {
      width = view.getUint32(offset + 8);
      height = view.getUint32(offset + 12);
      const bitDepth = data[8];
      colorType = data[9];
      if (bitDepth !== 8 || data[12] !== 0 || ![0, 2, 4, 6].includes(colorType)) {
        throw badPng(`unsupported format (bit depth ${bitDepth}, color type ${colorType}, interlace ${data[12]})`);
      }
      if (width === 0 || height === 0 || width * height > MAX_PNG_PIXELS) {
        throw badPng(`${width}×${height} is not an image this judge takes (at most ${MAX_PNG_PIXELS} pixels)`);
      }
    } else if (type === "IDAT") {
      idat.push(data);
    } else if (type === "IEND") {
      break;
    }
    offset += 12 + length;
  }
  if (colorType < 0) throw badPng("missing IHDR");
  const channels = { 0: 1, 2: 3, 4: 2, 6: 4 }[colorType as 0 | 2 | 4 | 6];
  const stride = width * channels;
  // No more than the image needs is inflated (a bomb stops there).
  const raw = inflateSync(Buffer.concat(idat), { maxOutputLength: (stride + 1) * height });
  if (raw.length < (stride + 1) * height) throw badPng("truncated image data");
  const rows = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const src = y * (stride + 1) + 1;
    const dst = y * stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? rows[dst + x - channels] : 0;
      const b = y > 0 ? rows[dst - stride + x] : 0;
      const c = x >= channels && y > 0 ? rows[dst - stride + x - channels] : 0;
      const v = raw[src + x];
      const predicted = filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : paeth(a, b, c);
      if (filter > 4) throw badPng(`bad filter ${filter}`);
      rows[dst + x] = (v + predicted) & 0xff;
    }
  }
  const pixels = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    for (let k = 0; k < 3; k++) pixels[i * 3 + k] = rows[i * channels + (channels < 3 ? 0 : k)];
  }
  return { width, height, pixels };
}
