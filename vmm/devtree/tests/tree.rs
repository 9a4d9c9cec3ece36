//! The generated tree, parsed back with the `fdt` crate: every node and property Linux 6.1's
//! 44x code reads, the values from the configuration, and errors (not panics) on bad input.
use fdt::node::FdtNode;
use fdt::Fdt;
use kestrel_devtree::*;
use proptest::prelude::*;

const MIB: u32 = 1 << 20;

fn vm(bootargs: &str) -> BambooVm<'_> {
    BambooVm {
        initrd: Some((0x190_0000, 0x1A0_7BFE)),
        timebase_hz: 123_456_789,
        cpu_hz: 987_654_321,
        uart_clock_hz: 1_843_200,
        console_baud: 38_400,
        ..BambooVm::new(64 * MIB, bootargs)
    }
}

/// A property's value as big-endian cells.
fn cells(node: FdtNode, name: &str) -> Vec<u32> {
    let p = node
        .property(name)
        .unwrap_or_else(|| panic!("{} has no {name}", node.name));
    assert_eq!(
        p.value.len() % 4,
        0,
        "{}/{name} is not whole cells",
        node.name
    );
    p.value
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
        .collect()
}

fn string(node: FdtNode, name: &str) -> String {
    let p = node
        .property(name)
        .unwrap_or_else(|| panic!("{} has no {name}", node.name));
    let (last, s) = p.value.split_last().expect("empty string property");
    assert_eq!(*last, 0, "{}/{name} is not NUL-terminated", node.name);
    String::from_utf8(s.to_vec()).unwrap()
}

fn string_list(node: FdtNode, name: &str) -> Vec<String> {
    string(node, name).split('\0').map(String::from).collect()
}

fn is_empty_prop(node: FdtNode, name: &str) -> bool {
    node.property(name).is_some_and(|p| p.value.is_empty())
}

fn node<'b, 'a>(fdt: &'b Fdt<'a>, path: &str) -> FdtNode<'b, 'a> {
    fdt.find_node(path)
        .unwrap_or_else(|| panic!("no node {path}"))
}

/// Every node's full path, depth first.
fn paths(fdt: &Fdt) -> Vec<String> {
    fn walk(n: FdtNode, prefix: &str, out: &mut Vec<String>) {
        for c in n.children() {
            let p = format!("{prefix}/{}", c.name);
            out.push(p.clone());
            walk(c, &p, out);
        }
    }
    let mut out = vec!["/".to_string()];
    walk(node(fdt, "/"), "", &mut out);
    out
}

#[test]
fn header_is_a_version_17_blob_of_its_own_length() {
    let dtb = bamboo_dtb(&vm("console=ttyS0")).unwrap();
    let word = |i: usize| u32::from_be_bytes(dtb[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!(word(0), 0xD00D_FEED);
    assert_eq!(word(1) as usize, dtb.len());
    assert_eq!(word(5), 17);
    let fdt = Fdt::new(&dtb).unwrap();
    assert_eq!(fdt.total_size(), dtb.len());
    assert_eq!(fdt.memory_reservations().count(), 0);
}

/// With the paravirtual interface: Linux's `/hypervisor` node and nothing else added.
#[test]
fn hypervisor_node_offers_kvm_hypercalls() {
    let dtb = bamboo_dtb(&BambooVm {
        paravirt: true,
        ..vm("")
    })
    .unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let hv = node(&fdt, "/hypervisor");
    assert_eq!(string_list(hv, "compatible"), ["linux,kvm"]);
    // lis r0,0x4b56; ori r0,r0,0x4d21; sc; nop (KVM's booke sequence, r0 = "KVM!").
    assert_eq!(
        cells(hv, "hcall-instructions"),
        [0x3c00_4b56, 0x6000_4d21, 0x4400_0002, 0x6000_0000]
    );
    assert!(is_empty_prop(hv, "has-idle"));
    let without = bamboo_dtb(&vm("")).unwrap();
    let plain = paths(&Fdt::new(&without).unwrap());
    let mut with = paths(&fdt);
    with.retain(|p| p != "/hypervisor");
    assert_eq!(with, plain);
}

#[test]
fn describes_only_what_the_vmm_models() {
    let dtb = bamboo_dtb(&vm("")).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    assert_eq!(
        paths(&fdt),
        [
            "/",
            "/aliases",
            "/cpus",
            "/cpus/cpu@0",
            "/memory@0",
            "/interrupt-controller0",
            "/plb",
            "/plb/opb",
            "/plb/opb/serial@ef600300",
            "/plb/opb/serial@ef600400",
            "/chosen",
        ]
    );
    let no_uart1 = bamboo_dtb(&BambooVm {
        uart1: false,
        ..vm("")
    })
    .unwrap();
    let fdt = Fdt::new(&no_uart1).unwrap();
    assert!(fdt.find_node(UART1_PATH).is_none());
    assert!(node(&fdt, "/aliases").property("serial1").is_none());
    assert!(fdt.find_node(UART0_PATH).is_some());
}

#[test]
fn root_probes_linux_bamboo_platform() {
    let dtb = bamboo_dtb(&vm("")).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let root = node(&fdt, "/");
    assert_eq!(string(root, "compatible"), "amcc,bamboo");
    assert_eq!(string(root, "model"), "amcc,bamboo");
    assert_eq!(cells(root, "#address-cells"), [2]);
    assert_eq!(cells(root, "#size-cells"), [1]);
    assert_eq!(cells(root, "dcr-parent"), [CPU_PHANDLE]);
    assert_eq!(fdt.find_phandle(CPU_PHANDLE).unwrap().name, "cpu@0");
}

#[test]
fn cpu_is_a_440_with_the_given_clocks() {
    let dtb = bamboo_dtb(&vm("")).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let cpus = node(&fdt, "/cpus");
    assert_eq!(cells(cpus, "#address-cells"), [1]);
    assert_eq!(cells(cpus, "#size-cells"), [0]);
    let cpu = node(&fdt, "/cpus/cpu@0");
    assert_eq!(string(cpu, "device_type"), "cpu");
    assert_eq!(string(cpu, "model"), "PowerPC,440EP");
    assert_eq!(cells(cpu, "reg"), [0]);
    assert_eq!(cells(cpu, "timebase-frequency"), [123_456_789]);
    assert_eq!(cells(cpu, "clock-frequency"), [987_654_321]);
    for p in ["i-cache-line-size", "d-cache-line-size"] {
        assert_eq!(cells(cpu, p), [32], "{p}");
    }
    for p in ["i-cache-size", "d-cache-size"] {
        assert_eq!(cells(cpu, p), [32 * 1024], "{p}");
    }
    assert!(is_empty_prop(cpu, "dcr-controller"));
    assert_eq!(string(cpu, "dcr-access-method"), "native");
    assert_eq!(cells(cpu, "phandle"), [CPU_PHANDLE]);
    let parsed: Vec<_> = fdt.cpus().collect();
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].timebase_frequency(), 123_456_789);
    assert_eq!(parsed[0].clock_frequency(), 987_654_321);
}

#[test]
fn memory_is_ram_from_zero() {
    for ram in [16 * MIB, 64 * MIB, 256 * MIB, 0x8000_0000] {
        let dtb = bamboo_dtb(&BambooVm::new(ram, "")).unwrap();
        let fdt = Fdt::new(&dtb).unwrap();
        let mem = node(&fdt, "/memory@0");
        assert_eq!(string(mem, "device_type"), "memory");
        assert_eq!(cells(mem, "reg"), [0, 0, ram]);
        let regions: Vec<_> = fdt.memory().regions().collect();
        assert_eq!(regions.len(), 1);
        assert_eq!(regions[0].starting_address as usize, 0);
        assert_eq!(regions[0].size, Some(ram as usize));
    }
}

#[test]
fn uic0_is_the_top_level_dcr_interrupt_controller() {
    let dtb = bamboo_dtb(&vm("")).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let uic = node(&fdt, "/interrupt-controller0");
    assert_eq!(string_list(uic, "compatible"), ["ibm,uic-440ep", "ibm,uic"]);
    assert!(is_empty_prop(uic, "interrupt-controller"));
    // uic_init_one() insists on exactly one cell and exactly two cells.
    assert_eq!(cells(uic, "cell-index"), [0]);
    assert_eq!(cells(uic, "dcr-reg"), [UIC0_DCR_BASE, UIC0_DCR_COUNT]);
    assert_eq!(cells(uic, "#interrupt-cells"), [2]);
    assert_eq!(cells(uic, "#address-cells"), [0]);
    // uic_init_tree() takes the UIC without `interrupts` as the primary one.
    assert!(uic.property("interrupts").is_none());
    assert_eq!(cells(uic, "phandle"), [UIC0_PHANDLE]);
    assert_eq!(
        fdt.find_phandle(UIC0_PHANDLE).unwrap().name,
        "interrupt-controller0"
    );
    assert_eq!(
        fdt.all_nodes()
            .filter(|n| n.property("interrupt-controller").is_some())
            .count(),
        1
    );
}

#[test]
fn constants_match_the_vmm_device_models() {
    assert_eq!(UIC0_DCR_BASE, kestrel_devices::UIC_DCR_BASE);
    assert_eq!(UIC0_DCR_COUNT, kestrel_devices::UIC_DCR_COUNT);
    assert_eq!(UART_REG_BYTES, kestrel_devices::UART_REGS);
    assert_eq!(UART0_PATH, uart_path(UART0_GPA));
    assert_eq!(UART1_PATH, uart_path(UART1_GPA));
}

/// The tree's devices come from the board description: a board with one more UART
/// gets one more serial node and alias.
#[test]
fn devices_come_from_the_board_description() {
    use kestrel_vmm_core::board::{self, Board, Device, Window};
    const UART2: Device = Device {
        window: Window::Mmio {
            base: 0xEF60_0500,
            size: 8,
        },
        irq: Some(2),
        name: "uart2",
        ..board::UART0
    };
    const DEVICES: &[Device] = &[board::UIC0, board::UART0, board::UART1, UART2];
    let mut v = vm("");
    v.board = Board {
        devices: DEVICES,
        ..board::BAMBOO
    };
    let dtb = bamboo_dtb(&v).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let node = fdt
        .find_node("/plb/opb/serial@ef600500")
        .expect("a node for the third UART");
    assert_eq!(
        node.property("interrupts").unwrap().value,
        [0, 0, 0, 2, 0, 0, 0, 4]
    );
    assert_eq!(
        fdt.find_node("/aliases")
            .unwrap()
            .property("serial2")
            .unwrap()
            .as_str(),
        Some("/plb/opb/serial@ef600500")
    );
    v.board = Board {
        devices: &[board::UART0],
        ..board::BAMBOO
    };
    assert_eq!(bamboo_dtb(&v), Err(Error::Board("no UIC on the DCR bus")));
}

#[test]
fn buses_are_what_of_platform_bus_probe_walks() {
    let dtb = bamboo_dtb(&vm("")).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let plb = node(&fdt, "/plb");
    assert!(string_list(plb, "compatible").contains(&"ibm,plb4".to_string()));
    assert_eq!(cells(plb, "#address-cells"), [2]);
    assert_eq!(cells(plb, "#size-cells"), [1]);
    assert!(is_empty_prop(plb, "ranges"));
    assert_eq!(cells(plb, "clock-frequency"), [PLB_HZ]);
    let opb = node(&fdt, "/plb/opb");
    assert!(string_list(opb, "compatible").contains(&"ibm,opb".to_string()));
    assert_eq!(cells(opb, "#address-cells"), [1]);
    assert_eq!(cells(opb, "#size-cells"), [1]);
    assert_eq!(
        cells(opb, "ranges"),
        [
            0,
            0,
            0,
            0x8000_0000,
            0x8000_0000,
            0,
            0x8000_0000,
            0x8000_0000
        ]
    );
    assert_eq!(cells(opb, "clock-frequency"), [OPB_HZ]);
}

#[test]
fn uarts_are_16550s_on_uic_inputs_0_and_1() {
    let dtb = bamboo_dtb(&vm("")).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    for (path, gpa, irq) in [
        (UART0_PATH, UART0_GPA, UART0_IRQ),
        (UART1_PATH, UART1_GPA, UART1_IRQ),
    ] {
        let u = node(&fdt, path);
        assert_eq!(string(u, "device_type"), "serial");
        assert_eq!(string(u, "compatible"), "ns16550");
        assert_eq!(cells(u, "reg"), [gpa, 8]);
        assert_eq!(cells(u, "clock-frequency"), [1_843_200]);
        assert_eq!(cells(u, "interrupt-parent"), [UIC0_PHANDLE]);
        assert_eq!(cells(u, "interrupts"), [irq, 4]);
        assert_eq!(u.interrupt_parent().unwrap().name, "interrupt-controller0");
        assert!(u.property("reg-shift").is_none() && u.property("reg-offset").is_none());
    }
    assert_eq!(cells(node(&fdt, UART0_PATH), "current-speed"), [38_400]);
    assert!(node(&fdt, UART1_PATH).property("current-speed").is_none());
    let aliases = fdt.aliases().unwrap();
    assert_eq!(aliases.resolve("serial0"), Some(UART0_PATH));
    assert_eq!(aliases.resolve("serial1"), Some(UART1_PATH));
    let no_speed = bamboo_dtb(&BambooVm {
        console_baud: 0,
        ..vm("")
    })
    .unwrap();
    let fdt = Fdt::new(&no_speed).unwrap();
    assert!(node(&fdt, UART0_PATH).property("current-speed").is_none());
}

#[test]
fn chosen_has_bootargs_initrd_and_console() {
    let args = "console=ttyS0 panic=1 kestrel.script=smoke quiet";
    let dtb = bamboo_dtb(&vm(args)).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let chosen = node(&fdt, "/chosen");
    assert_eq!(fdt.chosen().bootargs(), Some(args));
    assert_eq!(cells(chosen, "linux,initrd-start"), [0x190_0000]);
    assert_eq!(cells(chosen, "linux,initrd-end"), [0x1A0_7BFE]);
    assert_eq!(string(chosen, "linux,stdout-path"), UART0_PATH);
    assert_eq!(string(chosen, "stdout-path"), UART0_PATH);
    assert_eq!(fdt.chosen().stdout().unwrap().name, "serial@ef600300");

    let no_initrd = bamboo_dtb(&BambooVm::new(64 * MIB, "")).unwrap();
    let fdt = Fdt::new(&no_initrd).unwrap();
    let chosen = node(&fdt, "/chosen");
    assert!(chosen.property("linux,initrd-start").is_none());
    assert!(chosen.property("linux,initrd-end").is_none());
    // An empty command line is still a (one-byte) property: Linux then uses CONFIG_CMDLINE.
    assert_eq!(string(chosen, "bootargs"), "");
}

#[test]
fn bad_input_is_an_error() {
    let ok = vm("console=ttyS0");
    assert!(bamboo_dtb(&ok).is_ok());
    let cases: [(BambooVm, Error); 12] = [
        (BambooVm { ram_bytes: 0, ..ok }, Error::RamSize(0)),
        (
            BambooVm {
                ram_bytes: 64 * MIB + 1,
                ..ok
            },
            Error::RamSize(64 * MIB + 1),
        ),
        (
            BambooVm {
                ram_bytes: 0x8000_1000,
                ..ok
            },
            Error::RamSize(0x8000_1000),
        ),
        (
            BambooVm {
                bootargs: "console=ttyS0\0root=x",
                ..ok
            },
            Error::BootargsNul(13),
        ),
        (
            BambooVm {
                bootargs: &"x".repeat(2048),
                ..ok
            },
            Error::BootargsTooLong(2048),
        ),
        (
            BambooVm {
                initrd: Some((0x100_0000, 0x100_0000)),
                ..ok
            },
            Error::InitrdEmpty {
                start: 0x100_0000,
                end: 0x100_0000,
            },
        ),
        (
            BambooVm {
                initrd: Some((0x2000, 0x1000)),
                ..ok
            },
            Error::InitrdEmpty {
                start: 0x2000,
                end: 0x1000,
            },
        ),
        (
            BambooVm {
                initrd: Some((0x100_0000, 64 * MIB + 1)),
                ..ok
            },
            Error::InitrdOutsideRam {
                start: 0x100_0000,
                end: 64 * MIB + 1,
                ram_bytes: 64 * MIB,
            },
        ),
        (
            BambooVm {
                initrd: Some((0x8000_0000, 0xFFFF_FFFF)),
                ..ok
            },
            Error::InitrdOutsideRam {
                start: 0x8000_0000,
                end: 0xFFFF_FFFF,
                ram_bytes: 64 * MIB,
            },
        ),
        (
            BambooVm {
                timebase_hz: 0,
                ..ok
            },
            Error::ZeroFrequency("timebase-frequency"),
        ),
        (
            BambooVm { cpu_hz: 0, ..ok },
            Error::ZeroFrequency("cpu clock-frequency"),
        ),
        (
            BambooVm {
                uart_clock_hz: 0,
                ..ok
            },
            Error::ZeroFrequency("UART clock-frequency"),
        ),
    ];
    for (bad, want) in cases {
        let got = bamboo_dtb(&bad).expect_err(&format!("{bad:?} was accepted"));
        assert!(!got.to_string().is_empty());
        assert_eq!(got, want);
    }
    // The limits themselves are fine.
    assert!(bamboo_dtb(&BambooVm {
        bootargs: &"x".repeat(BOOTARGS_MAX),
        ..ok
    })
    .is_ok());
    assert!(bamboo_dtb(&BambooVm {
        initrd: Some((0, 64 * MIB)),
        ..ok
    })
    .is_ok());
}

#[test]
fn dtc_decompiles_the_blob_when_installed() {
    let dir = std::env::temp_dir().join(format!("kestrel-devtree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bamboo.dtb");
    std::fs::write(&file, bamboo_dtb(&vm("console=ttyS0")).unwrap()).unwrap();
    let out = std::process::Command::new("dtc")
        .args(["-I", "dtb", "-O", "dts"])
        .arg(&file)
        .output();
    std::fs::remove_dir_all(&dir).unwrap();
    let Ok(out) = out else {
        eprintln!("dtc not installed: skipped");
        return;
    };
    assert!(
        out.status.success(),
        "dtc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dts = String::from_utf8(out.stdout).unwrap();
    assert!(dts.contains("compatible = \"amcc,bamboo\";"));
    assert!(!dts.contains("pci"));
}

fn bgp_vm() -> BambooVm<'static> {
    BambooVm {
        board: kestrel_vmm_core::board::BGP_VM,
        fabric: Some(FabricPlace {
            node_address: 2,
            coords: [2, 0, 0],
        }),
        ..BambooVm::new(64 * MIB, "console=ttyS0")
    }
}

/// The BG/P board: BIC, collective, torus and bgnet under /plb with 36-bit addresses, the
/// virtio NIC, and the values ISSUE10.md's contract names.
#[test]
fn bgp_vm_has_the_interconnect_nodes() {
    let dtb = bamboo_dtb(&bgp_vm()).unwrap();
    let fdt = Fdt::new(&dtb).unwrap();
    let p = paths(&fdt);
    for want in [
        "/plb/interrupt-controller@730000000",
        "/plb/collective@610000000",
        "/plb/torus@600003000",
        "/plb/bgnet",
        "/plb/virtio@e0000000",
    ] {
        assert!(p.iter().any(|x| x == want), "{want} missing from {p:?}");
    }
    let bic = node(&fdt, "/plb/interrupt-controller@730000000");
    assert_eq!(string(bic, "compatible"), "kestrel,bgp-bic");
    assert_eq!(cells(bic, "reg"), [7, 0x3000_0000, 0x1000]);
    assert!(is_empty_prop(bic, "interrupt-controller"));
    assert_eq!(cells(bic, "#interrupt-cells"), [1]);
    assert_eq!(cells(bic, "interrupt-parent"), [UIC0_PHANDLE]);
    assert_eq!(cells(bic, "interrupts"), [30, 4]);
    assert_eq!(cells(bic, "phandle"), [BIC_PHANDLE]);
    let coll = node(&fdt, "/plb/collective@610000000");
    assert_eq!(string(coll, "compatible"), "kestrel,bgp-collective");
    assert_eq!(
        cells(coll, "reg"),
        [6, 0x1000_0000, 0x400, 6, 0x1100_0000, 0x400]
    );
    assert_eq!(cells(coll, "dcr-reg"), [0xC00, 0x80]);
    assert_eq!(cells(coll, "interrupt-parent"), [BIC_PHANDLE]);
    assert_eq!(cells(coll, "interrupts"), [0xB4, 0xB5, 0xB6, 0xB7]);
    assert_eq!(cells(coll, "kestrel,node-address"), [2]);
    let torus = node(&fdt, "/plb/torus@600003000");
    assert_eq!(string(torus, "compatible"), "kestrel,bgp-torus");
    assert_eq!(cells(torus, "reg"), [6, 0x3000, 0x1000]);
    assert_eq!(cells(torus, "dcr-reg"), [0xC80, 0x80, 0xD00, 0x100]);
    assert_eq!(cells(torus, "interrupt-parent"), [BIC_PHANDLE]);
    assert_eq!(cells(torus, "interrupts"), TORUS_IRQS);
    assert_eq!(cells(torus, "kestrel,coordinates"), [2, 0, 0]);
    assert_eq!(cells(torus, "kestrel,dma-group"), [3]);
    let bgnet = node(&fdt, "/plb/bgnet");
    assert_eq!(string(bgnet, "compatible"), "kestrel,bgnet");
    assert_eq!(
        bgnet.property("local-mac-address").unwrap().value,
        [6, 0, 0, 2, 0, 0]
    );
    assert_eq!(cells(bgnet, "torus-device"), [TORUS_PHANDLE]);
    assert_eq!(cells(bgnet, "collective-device"), [COLL_PHANDLE]);
    assert_eq!(cells(bgnet, "tree-route"), [0]);
    assert_eq!(cells(bgnet, "tree-channel"), [0]);
    let virtio = node(&fdt, "/plb/virtio@e0000000");
    assert_eq!(string(virtio, "compatible"), "virtio,mmio");
    assert_eq!(cells(virtio, "reg"), [0, 0xE000_0000, 0x200]);
    assert_eq!(cells(virtio, "interrupts"), [31, 4]);
    assert_eq!(cells(virtio, "interrupt-parent"), [UIC0_PHANDLE]);
    // Without the VM's place in the fabric: BIC and virtio only.
    let dtb = bamboo_dtb(&BambooVm {
        fabric: None,
        ..bgp_vm()
    })
    .unwrap();
    let p = paths(&Fdt::new(&dtb).unwrap());
    assert!(p.iter().any(|x| x == "/plb/interrupt-controller@730000000"));
    assert!(!p
        .iter()
        .any(|x| x.contains("torus") || x.contains("collective") || x.contains("bgnet")));
    // dtc reads it without a warning (when installed).
    let dir = std::env::temp_dir().join(format!("kestrel-devtree-bgp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bgp.dtb");
    std::fs::write(&file, bamboo_dtb(&bgp_vm()).unwrap()).unwrap();
    let out = std::process::Command::new("dtc")
        .args(["-I", "dtb", "-O", "dts"])
        .arg(&file)
        .output();
    std::fs::remove_dir_all(&dir).unwrap();
    let Ok(out) = out else {
        eprintln!("dtc not installed: skipped");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dtc: {stderr}");
    // (QEMU's layout of /plb/opb draws a unit-name warning of its own.)
    for new in [
        "interrupt-controller@",
        "collective",
        "torus",
        "bgnet",
        "virtio",
    ] {
        assert!(!stderr.contains(new), "dtc warns about {new}: {stderr}");
    }
}

/// A configuration proptest draws: mostly valid, sometimes not.
/// RAM bytes, bootargs, initrd `(a, b, squeeze into RAM)`, the four clocks/speeds, UART1.
type Drawn = (u32, String, Option<(u32, u32, bool)>, [u32; 4], bool);

fn any_vm() -> impl Strategy<Value = Drawn> {
    (
        prop_oneof![4 => (1u32..=0x8_0000).prop_map(|pages| pages * RAM_ALIGN), 1 => any::<u32>()],
        prop_oneof![4 => "[ -~]{0,200}", 1 => any::<String>(), 1 => "[a-z]{2040,2050}"],
        proptest::option::of((any::<u32>(), any::<u32>(), any::<bool>())),
        prop_oneof![
            4 => [1u32.., 1u32.., 1u32.., 0u32..],
            1 => [0u32..=1, 0u32..=1, 0u32..=1, 0u32..=1].prop_map(|h| h.map(|x| x * 7)),
        ],
        any::<bool>(),
    )
}

proptest! {
    #[test]
    fn every_config_is_a_parsable_tree_or_an_error((ram, args, initrd, hz, uart1) in any_vm()) {
        let vm = BambooVm {
            ram_bytes: ram,
            bootargs: &args,
            // With the flag, squeeze the drawn range into RAM to reach the valid case.
            initrd: initrd.map(|(a, b, inside)| {
                if inside && ram != 0 {
                    let start = a % ram;
                    (start, start + 1 + b % (ram - start))
                } else {
                    (a, b)
                }
            }),
            timebase_hz: hz[0],
            cpu_hz: hz[1],
            uart_clock_hz: hz[2],
            console_baud: hz[3],
            uart1,
            board: if uart1 { kestrel_vmm_core::board::BGP_VM } else { kestrel_vmm_core::board::BAMBOO },
            fabric: uart1.then_some(FabricPlace { node_address: hz[3] & 0xF, coords: [hz[3] as u8, 0, 0] }),
            paravirt: hz[0] & 1 != 0,
        };
        let valid = ram != 0
            && ram % RAM_ALIGN == 0
            && u64::from(ram) <= RAM_LIMIT
            && !args.contains('\0')
            && args.len() <= BOOTARGS_MAX
            && vm.initrd.is_none_or(|(s, e)| s < e && e <= ram)
            && hz[..3].iter().all(|&h| h != 0);
        match bamboo_dtb(&vm) {
            Err(e) => prop_assert!(!valid, "valid config refused: {e}"),
            Ok(dtb) => {
                prop_assert!(valid, "invalid config accepted: {vm:?}");
                let fdt = Fdt::new(&dtb).unwrap();
                prop_assert_eq!(fdt.total_size(), dtb.len());
                prop_assert_eq!(fdt.chosen().bootargs(), Some(args.as_str()));
                prop_assert_eq!(cells(node(&fdt, "/memory@0"), "reg"), [0, 0, ram]);
                prop_assert_eq!(cells(node(&fdt, "/cpus/cpu@0"), "timebase-frequency"), [hz[0]]);
                let chosen = node(&fdt, "/chosen");
                match vm.initrd {
                    Some((s, e)) => {
                        prop_assert_eq!(cells(chosen, "linux,initrd-start"), [s]);
                        prop_assert_eq!(cells(chosen, "linux,initrd-end"), [e]);
                    }
                    None => prop_assert!(chosen.property("linux,initrd-start").is_none()),
                }
                prop_assert_eq!(fdt.find_node(UART1_PATH).is_some(), uart1);
                prop_assert_eq!(cells(node(&fdt, "/interrupt-controller0"), "dcr-reg"), [0xC0, 9]);
            }
        }
    }
}
