/* Built by .ci/directml-wine.sh as bcryptprimitives.dll and placed beside tjoin.exe, for the
   test run under Debian 12's Wine 8.0 only; tjoin never ships it. It fills two gaps of that
   Wine:

   - Rust's standard library (1.78 and later) gets random bytes from ProcessPrng in
     bcryptprimitives.dll, which Wine 8.0 does not have: tjoin.exe would not start. This
     ProcessPrng takes them from advapi32's RtlGenRandom (exported as SystemFunction036).

   - When the Direct3D 12 device is released, Wine 8.0 lets winevulkan.dll go before vkd3d's
     last call into it, and the process crashes on its way out. Loading winevulkan.dll once
     more when this library is attached keeps it loaded until the process ends. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance;
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH)
        LoadLibraryW(L"winevulkan.dll");
    return TRUE;
}
