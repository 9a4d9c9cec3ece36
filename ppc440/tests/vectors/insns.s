# Hand-written test vectors for kestrel-ppc440's decoder (src/decode.rs).
#
# gen.py assembles this file with GNU as for the PPC440 (-m440), disassembles it with
# objdump (-M440,raw: no extended mnemonics) and writes `vectors.txt`; tests/vectors.rs
# checks that the decoder agrees with binutils on every word. Every instruction the
# decoder models appears here with boundary operands, plus a few it deliberately leaves
# as `Other`. Operands are plain numbers so the file assembles without macros.

# --- MSR and external-interrupt enable (privileged) -------------------------------------
mfmsr 3
mfmsr 31
mtmsr 0
mtmsr 3
wrtee 3
wrtee 31
wrteei 0
wrteei 1

# --- Interrupt returns (privileged) -----------------------------------------------------
rfi
rfci
rfmci

# --- mfspr/mtspr: every SPR the decoder names, both directions, plus unnamed ones ------
mfspr 3,1
mfspr 3,8
mfspr 3,9
mtspr 1,3
mtspr 8,3
mtspr 9,3
mfspr 3,22
mtspr 22,3
mfspr 3,26
mtspr 26,3
mfspr 4,27
mtspr 27,4
mfspr 3,48
mtspr 48,3
mtspr 54,3
mfspr 3,58
mtspr 58,3
mfspr 3,59
mtspr 59,3
mfspr 3,61
mtspr 61,3
mfspr 3,62
mtspr 62,3
mfspr 3,63
mtspr 63,3
mfspr 3,256
mtspr 256,3
mfspr 3,260
mfspr 3,261
mfspr 3,262
mfspr 3,263
mfspr 3,268
mfspr 3,269
mfspr 3,272
mtspr 272,3
mfspr 3,273
mtspr 273,3
mfspr 3,274
mtspr 274,3
mfspr 3,275
mtspr 275,3
mtspr 276,3
mtspr 277,3
mtspr 278,3
mtspr 279,3
mtspr 284,3
mtspr 285,3
mfspr 3,286
mfspr 3,287
mfspr 3,304
mtspr 304,3
mfspr 3,308
mtspr 308,3
mfspr 3,309
mtspr 309,3
mfspr 3,310
mtspr 310,3
mtspr 312,3
mtspr 313,3
mtspr 314,3
mtspr 315,3
mtspr 316,3
mtspr 317,3
mtspr 318,3
mtspr 319,3
mfspr 3,336
mtspr 336,3
mfspr 3,340
mtspr 340,3
mtspr 400,3
mtspr 401,3
mtspr 402,3
mtspr 403,3
mtspr 404,3
mtspr 405,3
mtspr 406,3
mtspr 407,3
mtspr 408,3
mtspr 409,3
mtspr 410,3
mtspr 411,3
mtspr 412,3
mtspr 413,3
mtspr 414,3
mtspr 415,3
mfspr 3,570
mtspr 570,3
mfspr 3,571
mtspr 571,3
mfspr 3,572
mtspr 572,3
mtspr 880,3
mtspr 881,3
mtspr 882,3
mtspr 883,3
mtspr 884,3
mtspr 885,3
mtspr 886,3
mtspr 887,3
mfspr 3,888
mtspr 888,3
mtspr 912,3
mtspr 913,3
mtspr 914,3
mtspr 915,3
mtspr 916,3
mtspr 917,3
mtspr 918,3
mtspr 919,3
mtspr 920,3
mtspr 921,3
mfspr 3,923
mfspr 3,924
mfspr 3,925
mfspr 3,926
mfspr 3,927
mfspr 3,946
mtspr 946,3
mfspr 3,947
mtspr 947,3
mfspr 3,979
mfspr 3,1011
mfspr 0,0
mtspr 1023,31
mfspr 31,1023
mfspr 5,15
mfspr 5,16
mfspr 5,511
mfspr 5,512

# --- Device control registers (privileged) ----------------------------------------------
mfdcr 3,0
mfdcr 3,0xc0
mfdcr 4,0xc6
mtdcr 0xc0,3
mtdcr 0xc4,5
mfdcr 31,1023
mtdcr 1023,31
mtdcr 0x1f,0
mtdcr 0x20,0

# --- TLB management (privileged); WS selects entry word 0, 1 or 2 -----------------------
tlbwe 4,3,0
tlbwe 4,3,1
tlbwe 4,3,2
tlbwe 0,0,0
tlbwe 31,31,2
tlbre 5,3,0
tlbre 5,3,1
tlbre 5,3,2
tlbre 31,0,2
tlbsx 3,4,5
tlbsx 3,0,5
tlbsx. 3,4,5
tlbsx. 31,31,31
tlbsync

# --- Cache management -------------------------------------------------------------------
iccci 0,0
iccci 3,4
dccci 0,0
dccci 3,4
dcbi 3,4
dcbi 0,4
dcread 3,4,5
dcread 3,0,5
icread 3,4
icread 0,4
icbi 3,4
icbi 0,31
dcbz 3,4
dcbz 0,4

# --- Synchronisation and system call (not privileged) -----------------------------------
isync
msync
mbar 0
mbar 1
mbar 31
sc

# --- D-form loads and stores ------------------------------------------------------------
lbz 3,0(4)
lbz 3,-1(0)
lbzu 3,1(4)
lhz 3,2(4)
lhzu 3,-2(4)
lha 3,2(4)
lha 31,-32768(31)
lhau 3,2(4)
lwz 3,-8(1)
lwz 3,0(0)
lwz 3,32767(31)
lwz 3,-32768(2)
lwzu 3,4(1)
lwzu 0,4(1)
stb 3,0(4)
stbu 3,1(4)
stbu 4,1(4)
sth 3,2(4)
sthu 3,2(4)
stw 3,8(1)
stw 0,0(0)
stwu 1,-16(1)
lmw 3,8(1)
lmw 31,0(0)
lmw 30,0(29)
stmw 3,8(1)
stmw 0,0(0)
stmw 31,-4(31)

# --- X-form loads and stores ------------------------------------------------------------
lbzx 3,4,5
lbzx 3,0,5
lbzux 3,4,5
lhzx 3,4,5
lhzux 3,4,5
lhax 3,4,5
lhaux 3,4,5
lwzx 3,4,5
lwzx 3,0,5
lwzx 31,31,31
lwzux 3,4,5
stbx 3,4,5
stbux 3,4,5
stbux 4,4,5
sthx 3,4,5
sthux 3,4,5
stwx 3,4,5
stwx 3,0,0
stwux 3,4,5
lhbrx 3,4,5
lhbrx 3,0,5
lwbrx 3,4,5
sthbrx 3,4,5
stwbrx 3,4,5
stwbrx 3,0,5

# --- Left as Other on purpose -----------------------------------------------------------
# Not sensitive: the CR moves and ordinary arithmetic.
mfcr 3
mtcrf 0xff,3
add 3,4,5
# Indexed DCR access and tlbivax: binutils accepts them for any Book E part, but the
# 440x5 core lacks them (QEMU's 440 models raise an illegal-instruction interrupt).
mfdcrx 3,4
mtdcrx 4,3
tlbivax 3,4
# wait is a later Book E addition the 440 lacks; GNU as rejects it with -m440.
.long 0x7c00007c
# lwarx/stwcx. and string loads are not modeled (yet).
lwarx 3,4,5
stwcx. 3,4,5
lswi 3,10,8
# Floating-point loads and stores (Book E; the data register is an FPR).
lfs 1,8(3)
lfs 31,-4(0)
lfsu 2,16(4)
lfsu 4,16(4)
lfsx 3,4,5
lfsx 3,0,5
lfsux 6,7,8
lfd 1,8(3)
lfd 0,32767(31)
lfdu 9,-8(1)
lfdx 10,11,12
lfdux 13,14,15
stfs 1,8(3)
stfsu 2,-16(1)
stfsx 3,4,5
stfsux 6,7,8
stfd 31,0(2)
stfd 0,-32768(0)
stfdu 1,8(2)
stfdx 5,6,7
stfdux 8,9,10
stfiwx 11,12,13
stfiwx 0,0,1
