/* Built by .ci/directml-wine.sh as desktop.exe and run under Wine, in the background, for the
   whole test run; tjoin never ships it.

   Wine's desktop process (explorer.exe /desktop) is started by the first program that needs
   the desktop window, and it inherits that program's standard handles. When the first such
   program is a tjoin.exe started by an integration test, with its stdout and stderr on pipes,
   explorer.exe holds those pipes open, and the test, reading them to their end, waits forever.
   Wine ends the desktop process about a second after the last program on the desktop exits,
   so starting it once at the beginning is not enough: any pause between two runs lets it go,
   and the next Direct3D program starts it again, with its own handles.

   This program asks for the desktop window, so explorer.exe starts from it, with the
   /dev/null handles the script gives it, and then sleeps, keeping the desktop in use until
   the script ends the Wine server. */
#include <windows.h>

int main(void)
{
    GetDesktopWindow();
    Sleep(INFINITE);
    return 0;
}
